//! Building a zone: records are appended to a log as they are read, and
//! turned into nodes in one pass at the end.
//!
//! Reading a zone allocates nothing per record: each record is a few bytes
//! in the log and a 24-byte entry. `build` sorts the entries by (shard,
//! owner hash, owner, type), so that each node's records are adjacent and
//! nodes come grouped by shard; finds the empty non-terminals; checks the
//! zone; and packs each shard, on every core for large zones.
//!
//! A large builder's log is split by owner hash into [`LOG_GROUPS`] logs,
//! one per group of shards, and packing frees each group's log once its
//! shards are packed: the log and the packed zone (each about the zone's
//! wire size) are then not held whole at once. What packing reads of
//! other nodes (the addresses of NS, MX and SRV targets) is read before
//! (`targets.rs`).

use std::cmp::Ordering;
use std::hash::BuildHasher;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use hashbrown::{DefaultHashBuilder, HashMap, HashSet};
use heron_proto::encoded::{AdditionalBlock, EncodedRef, Names, Signatures, pack_rrset};
use heron_proto::name::{NameBuf, ends_with_name, lowercase_wire, suffixes};
use heron_proto::rdata;
use heron_proto::{Class, Name, RType};

use super::chain::DenialChain;
use super::node::{NodeWriter, RRSET_TOO_LARGE, Shard};
use super::table::NodeTable;
use super::targets::{Emit, Targets};
use super::{
    Links, Problem, SOA_FAR, Severity, Zone, count, is_wildcard, node_place, shard_of, soa_field,
};
use crate::prefetch::prefetch;
use crate::zonefile::{Location, Record};

/// What a log record is.
const DATA: u8 = 0;
const SIG: u8 = 1;
/// No record: an empty non-terminal's name.
const EMPTY: u8 = 2;

/// Records per shard aimed at: small enough that a version changing a few
/// names copies little, large enough that the shard table stays small.
/// A batch of 64 dynamic updates to a signed zone of 10,000 names (hash-
/// placed, so the names land in different shards) copied about 3/4 of
/// the zone at 1,024 and a third at 256: 3,480 and 2,805 against 4,969
/// and 4,539 signed updates/s. The 2,000,000-record zone loaded in
/// 1.3-1.4 s and 158 MB RSS at 256, 1.6-1.9 s and 188-195 MB at 1,024;
/// CPU per query on it and on the root-like zone the same within noise.
pub(super) const RECORDS_PER_SHARD: usize = 256;

/// Zones with more records than this are packed on every core.
const PARALLEL_RECORDS: usize = 50_000;

/// How many records ahead of the one read to prefetch from the log.
const LOG_PREFETCH_AHEAD: usize = 8;

/// Most targets whose addresses one RRset brings into the additional section.
const MAX_ADDITIONAL_TARGETS: usize = 16;

/// A builder whose log reaches this size splits it into groups. Below
/// PARALLEL_RECORDS' log size, so that every zone packed on several cores
/// is packed by group (a group per thread at a time).
const GROUPED_LOG_BYTES: usize = 1 << 20;

/// Log bytes a packing thread frees between two hand-backs of free heap
/// to the kernel (each a walk of the allocator's free lists).
const RELEASE_AFTER_BYTES: usize = 8 << 20;

/// Logs of a grouped builder: a record's group is its owner's shard among
/// this many (a power of two), so that a group's records fill whole
/// shards of any zone of at least as many shards.
const LOG_GROUPS: usize = 64;

/// One record read: where it is in the log and where it came from.
#[derive(Clone, Copy, Default)]
struct Entry {
    /// Of the lower-cased owner.
    hash: u64,
    /// Offset in its group's log, each below [`MAX_LOG_BYTES`].
    at: u32,
    line: u32,
    /// Index into `files`, and [`DEEP`].
    file_and_depth: u32,
    /// The record's type (for a signature the type covered) and kind, as
    /// logged: what orders an owner's records, read without the log.
    rtype: u16,
    kind: u8,
}

/// Most bytes one log (of one group, once grouped) holds: offsets are
/// 32 bits, so that an entry with the sort's keys stays 24 octets. With
/// [`LOG_GROUPS`] groups that is a zone of about 256 GiB.
const MAX_LOG_BYTES: usize = u32::MAX as usize;

/// The owner is below a child of the apex: it has a parent that may need
/// an empty non-terminal. Known when the record is read, so that finding
/// them need not read the log again for every owner of a flat zone.
const DEEP: u32 = 1 << 31;

/// An NS, MX or SRV record: it names a target whose addresses packing
/// needs (`targets.rs`), found without reading every record again.
const NAMES_TARGET: u32 = 1 << 30;

impl Entry {
    fn file(&self) -> u32 {
        self.file_and_depth & !(DEEP | NAMES_TARGET)
    }

    fn is_deep(&self) -> bool {
        self.file_and_depth & DEEP != 0
    }

    fn names_target(&self) -> bool {
        self.file_and_depth & NAMES_TARGET != 0
    }

    /// The order within a shard: owner hash, type, kind, then as read.
    #[inline]
    fn order(&self) -> u128 {
        (self.hash as u128) << 64
            | (self.rtype as u128) << 40
            | (self.kind as u128) << 32
            | self.at as u128
    }
}

/// The record an entry points at, in its group's log (`logs` has one
/// log, or [`LOG_GROUPS`]).
#[inline]
fn read<'l>(logs: &'l [Vec<u8>], e: &Entry) -> Logged<'l> {
    read_logged(&logs[shard_of(e.hash, logs.len())], e.at as usize)
}

/// Bytes a record takes in the log.
fn logged_len(r: &Logged) -> usize {
    1 + r.owner.len() + 9 + r.rdata.len()
}

/// A record as the log holds it.
struct Logged<'a> {
    /// As written (case preserved).
    owner: &'a [u8],
    /// For signatures, the type covered.
    rtype: RType,
    kind: u8,
    ttl: u32,
    rdata: &'a [u8],
}

/// Log layout of a record: owner length, owner, type, kind, TTL, RDATA
/// length, RDATA.
fn log_record(log: &mut Vec<u8>, owner: &[u8], rtype: RType, kind: u8, ttl: u32, rdata: &[u8]) {
    log.push(owner.len() as u8);
    log.extend_from_slice(owner);
    log.extend_from_slice(&rtype.0.to_be_bytes());
    log.push(kind);
    log.extend_from_slice(&ttl.to_be_bytes());
    log.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    log.extend_from_slice(rdata);
}

fn read_logged(log: &[u8], at: usize) -> Logged<'_> {
    let owner_end = at + 1 + log[at] as usize;
    let f = &log[owner_end..owner_end + 9];
    let rdlen = u16::from_be_bytes([f[7], f[8]]) as usize;
    let rdata_at = owner_end + 9;
    Logged {
        owner: &log[at + 1..owner_end],
        rtype: RType(u16::from_be_bytes([f[0], f[1]])),
        kind: f[2],
        ttl: u32::from_be_bytes([f[3], f[4], f[5], f[6]]),
        rdata: &log[rdata_at..rdata_at + rdlen],
    }
}

/// A node to build: a run of sorted entries.
#[derive(Clone, Copy)]
struct Draft {
    start: u32,
    len: u32,
}

/// Collects records and builds a checked [`Zone`].
pub struct ZoneBuilder {
    origin: Name,
    class: Class,
    hasher: DefaultHashBuilder,
    /// One log, or [`LOG_GROUPS`] once large (see `read`).
    logs: Vec<Vec<u8>>,
    /// Log size at which it splits: [`GROUPED_LOG_BYTES`] (tests set
    /// others, to build one zone both ways).
    group_from: usize,
    /// Most bytes of one log: [`MAX_LOG_BYTES`] (tests set less).
    log_limit: usize,
    entries: Vec<Entry>,
    files: Vec<Arc<Path>>,
    problems: Vec<Problem>,
    /// Children of each node below the apex that has any (see
    /// `Zone::children`), counted while finding empty non-terminals.
    children: HashMap<Box<[u8]>, u32>,
    /// Whether the checks that only warn run (see
    /// [`ZoneBuilder::without_warnings`]).
    warn: bool,
    /// Whether the zone built is served, so it needs what answers and
    /// changes read (see [`ZoneBuilder::only_to_sign`]).
    served: bool,
    /// Whether a DNAME was added below the apex: only then is the built
    /// zone looked at for names below one.
    inner_dnames: bool,
}

impl ZoneBuilder {
    pub fn new(origin: Name, class: Class) -> ZoneBuilder {
        ZoneBuilder {
            origin,
            class,
            hasher: DefaultHashBuilder::default(),
            logs: vec![Vec::new()],
            group_from: GROUPED_LOG_BYTES,
            log_limit: MAX_LOG_BYTES,
            entries: Vec::new(),
            files: Vec::new(),
            problems: Vec::new(),
            children: HashMap::new(),
            warn: true,
            served: true,
            inner_dnames: false,
        }
    }

    /// Leaves out of the zone built what only serving it reads: the
    /// addresses of NS, MX and SRV targets for the additional section and
    /// the index of the nodes that name each target. For a zone read only
    /// to be signed (the signed zone is built anew, with both): they were
    /// a sixth of building the root-like zone. Its checks and warnings
    /// are the same; answers from it would have no additional section.
    pub fn only_to_sign(mut self) -> ZoneBuilder {
        self.served = false;
        self
    }

    /// Skips the checks that can only warn (glue of delegations, TTLs
    /// within an RRset, the denial chain): for a zone made from one whose
    /// warnings were said when it was loaded (the signer's), where they
    /// were a tenth of the build. Errors are still found.
    pub fn without_warnings(mut self) -> ZoneBuilder {
        self.warn = false;
        self
    }

    /// Makes room for the records of a zone file of `text_len` bytes, so
    /// that reading it does not grow the log step by step (with 100,000
    /// small zones, the regrowth was a tenth of the load).
    pub fn reserve_for_text(&mut self, text_len: usize) {
        // A log record holds the full owner, so it is larger than its line.
        self.reserve_log(text_len + text_len / 2 + 64);
        self.entries.reserve(text_len / 24 + 4);
    }

    /// Makes room for `records` more records taking `log_bytes` in the
    /// log (see `log_record`: each its owner, RDATA and 10 octets), so
    /// that adding them does not copy the log as it grows.
    pub fn reserve(&mut self, records: usize, log_bytes: usize) {
        self.reserve_log(log_bytes);
        self.entries.reserve(records);
    }

    /// Room for `bytes` more in the log: in each group its share and a
    /// margin for the spread of the hash, once the log is grouped.
    fn reserve_log(&mut self, bytes: usize) {
        if self.logs.len() == 1 && self.logs[0].len() + bytes >= self.group_from {
            self.split_log();
        }
        let groups = self.logs.len();
        let share = match groups {
            1 => bytes,
            _ => bytes / groups + bytes / groups / 8 + 64,
        };
        self.logs.iter_mut().for_each(|log| log.reserve(share));
    }

    /// Moves every record into its group's log (a copy of a log of about
    /// [`GROUPED_LOG_BYTES`], once per large builder).
    fn split_log(&mut self) {
        let old = std::mem::take(&mut self.logs);
        let mut logs: Vec<Vec<u8>> = vec![Vec::new(); LOG_GROUPS];
        for e in &mut self.entries {
            let len = logged_len(&read(&old, e));
            let log = &mut logs[shard_of(e.hash, LOG_GROUPS)];
            let at = log.len() as u32;
            let from = e.at as usize;
            log.extend_from_slice(&old[0][from..from + len]);
            e.at = at;
        }
        self.logs = logs;
    }

    /// An empty builder for the same zone whose records can later be
    /// [`ZoneBuilder::append`]ed to this one: a piece of a large file is
    /// read on a thread of its own into one, and a signing thread keeps
    /// its signatures in one while another fills this builder.
    pub fn sibling(&self) -> ZoneBuilder {
        ZoneBuilder {
            origin: self.origin.clone(),
            class: self.class,
            hasher: self.hasher.clone(),
            logs: vec![Vec::new(); self.logs.len()],
            group_from: self.group_from,
            log_limit: self.log_limit,
            warn: self.warn,
            served: self.served,
            ..ZoneBuilder::new(self.origin.clone(), self.class)
        }
    }

    /// Whether nothing was added (no record, no problem).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.logs.iter().all(Vec::is_empty) && self.problems.is_empty()
    }

    /// Adds the records (and problems) of a [`ZoneBuilder::sibling`] after
    /// this one's, as if they had been added here in that order.
    pub fn append(&mut self, mut other: ZoneBuilder) {
        self.inner_dnames |= other.inner_dnames;
        let both = self.log_bytes() + other.log_bytes();
        if self.logs.len() != other.logs.len() || both >= self.group_from {
            for b in [&mut *self, &mut other] {
                if b.logs.len() == 1 {
                    b.split_log();
                }
            }
        }
        let joined = self
            .logs
            .iter()
            .zip(&other.logs)
            .map(|(a, b)| a.len() + b.len());
        if joined.max().unwrap_or(0) > self.log_limit {
            self.refuse_too_large();
            return;
        }
        let shifts: Vec<u32> = self.logs.iter().map(|log| log.len() as u32).collect();
        let files: Vec<u32> = other.files.iter().map(|f| self.file_index(f)).collect();
        let flags = DEEP | NAMES_TARGET;
        let moved = other.entries.into_iter().map(|e| Entry {
            at: e.at + shifts[shard_of(e.hash, shifts.len())],
            file_and_depth: files[e.file() as usize] | (e.file_and_depth & flags),
            ..e
        });
        if self.entries.is_empty() {
            // The first piece: take its buffers instead of copying them.
            self.entries = moved.collect();
            self.logs = other.logs;
        } else {
            self.entries.extend(moved);
            for (log, theirs) in self.logs.iter_mut().zip(&other.logs) {
                log.extend_from_slice(theirs);
            }
        }
        self.problems.extend(other.problems);
    }

    /// Records the zone as too large, not again for the records refused
    /// right after (every record past the limit comes here); the build
    /// then fails.
    fn refuse_too_large(&mut self) {
        if self.problems.last().is_some_and(|p| p.message == TOO_LARGE) {
            return;
        }
        self.problems.push(Problem {
            severity: Severity::Error,
            location: None,
            message: TOO_LARGE.to_string(),
        });
    }

    /// The records added so far, and the octets the log holds of them.
    pub fn size(&self) -> (usize, usize) {
        (self.entries.len(), self.log_bytes())
    }

    fn log_bytes(&self) -> usize {
        self.logs.iter().map(Vec::len).sum()
    }

    fn file_index(&mut self, file: &Arc<Path>) -> u32 {
        if !self.files.last().is_some_and(|f| Arc::ptr_eq(f, file)) {
            match self.files.iter().position(|f| Arc::ptr_eq(f, file)) {
                Some(i) => return i as u32,
                None => self.files.push(file.clone()),
            }
        }
        (self.files.len() - 1) as u32
    }

    /// Adds one record; out-of-zone records are reported and ignored.
    pub fn add(&mut self, rec: &Record) {
        if let Some(problem) = refusal(&self.origin, self.class, rec) {
            self.problems.push(problem);
            return;
        }
        let (rtype, kind) = kind_of(rec.rtype, &rec.rdata);
        let file = self.file_index(&rec.location.file);
        self.push(
            rec.owner.as_wire(),
            rtype,
            kind,
            rec.ttl,
            &rec.rdata,
            (file, rec.location.line),
        );
    }

    /// [`ZoneBuilder::add`] of a record given by its parts, for a caller
    /// that has checked what `add` refuses (in the zone, of its class, not
    /// a meta type, RDATA in wire form): a zone transfer's records go in
    /// without a `Record` built for each. `from` is where it was read:
    /// (file, line).
    pub fn add_wire(
        &mut self,
        owner: &[u8],
        (rtype, ttl): (RType, u32),
        rdata: &[u8],
        from: (&Arc<Path>, u32),
    ) {
        debug_assert!(heron_proto::name::ends_with_name(
            owner,
            self.origin.as_wire()
        ));
        let (rtype, kind) = kind_of(rtype, rdata);
        let file = self.file_index(from.0);
        self.push(owner, rtype, kind, ttl, rdata, (file, from.1));
    }

    fn push(
        &mut self,
        owner: &[u8],
        rtype: RType,
        kind: u8,
        ttl: u32,
        rdata: &[u8],
        from: (u32, u32),
    ) {
        let mut lower = NameBuf::new();
        lower.set(owner);
        lower.make_lowercase();
        let parent_len = owner.len() - owner.first().map_or(0, |&l| 1 + l as usize);
        let deep = parent_len > self.origin.wire_len();
        let names_target = kind == DATA && matches!(rtype, RType::NS | RType::MX | RType::SRV);
        self.inner_dnames |= rtype == RType::DNAME;
        debug_assert!(from.0 < NAMES_TARGET, "file indexes stay below the flags");
        let hash = self.hasher.hash_one(lower.as_wire());
        let group = shard_of(hash, self.logs.len());
        let log = &mut self.logs[group];
        if log.len() > self.log_limit {
            self.refuse_too_large();
            return;
        }
        self.entries.push(Entry {
            hash,
            at: log.len() as u32,
            line: from.1,
            file_and_depth: from.0
                | if deep { DEEP } else { 0 }
                | if names_target { NAMES_TARGET } else { 0 },
            rtype: rtype.0,
            kind,
        });
        log_record(log, owner, rtype, kind, ttl, rdata);
        if self.logs.len() == 1 && self.logs[0].len() >= self.group_from {
            self.split_log();
        }
    }

    /// Checks the zone and builds it. Errors make the zone unusable;
    /// warnings come back with the zone.
    pub fn build(mut self) -> Result<(Zone, Vec<Problem>), Vec<Problem>> {
        let shards = (self.entries.len() / RECORDS_PER_SHARD)
            .max(1)
            .next_power_of_two();
        let mut drafts = self.sort_entries(shards);
        if self.add_empty_non_terminals(&drafts, shards) {
            drafts = self.sort_entries(shards);
        }
        let mut problems = std::mem::take(&mut self.problems);
        let children = std::mem::take(&mut self.children);
        let logs = std::mem::take(&mut self.logs);
        let mut zone = Plan {
            b: &self,
            drafts: &drafts,
            shards,
            starts: draft_starts(&self.entries, &drafts, shards),
            hashes: draft_hashes(&self.entries, &drafts),
            apex: self.origin.to_lowercase(),
            targets: None,
        };
        // One log stays whole through packing; groups are freed as they
        // go, so what packing reads of other nodes is read first.
        if logs.len() > 1 {
            zone.targets = Some(zone.gather_targets(&logs));
        }
        // What is left of the log: the apex's group.
        let (built, logs) = zone.pack(logs);
        problems.extend(built.problems);
        problems.sort_by(|a, b| place(a).cmp(&place(b)));
        let apex_node = zone.find(zone.apex.as_wire(), &logs);
        let apex = apex_node.map(|d| zone.parts(d, &logs)).unwrap_or_default();
        zone.check_apex(&apex, &logs, &mut problems);
        keep_first_problems(&mut problems);
        if problems.iter().any(|p| p.severity == Severity::Error) {
            return Err(problems);
        }
        let negative_ttl = negative_ttl(&apex);
        let apex_dname = apex.set(RType::DNAME).is_some();
        let apex_hash = self.hasher.hash_one(zone.apex.as_wire());
        let apex_shard = shard_of(apex_hash, shards);
        let shards_built: Vec<Arc<Shard>> = built.shards.into_iter().map(|(_, s)| s).collect();
        let apex_at = shards_built[apex_shard]
            .find(apex_hash, zone.apex.as_wire())
            .expect("the apex has records");
        let mut referrers: HashMap<Box<[u8]>, Vec<Box<[u8]>>> = HashMap::new();
        for (target, node) in built.referrers {
            referrers.entry(target).or_default().push(node);
        }
        let mut built_zone = Zone {
            origin: zone.apex.clone(),
            origin_labels: zone.apex.label_count() as u8,
            class: self.class,
            hasher: self.hasher,
            shards: shards_built.into(),
            apex: node_place(apex_shard, apex_at),
            apex_dname,
            wildcards: built.wildcards,
            negative_ttl,
            soa_at: SOA_FAR, // until `find_soa`
            expires_at: AtomicU32::new(0),
            records: count(built.records),
            nodes: count(drafts.len()),
            links: Links {
                children,
                referrers,
            }
            .boxed(),
            chain: None,
        }
        .find_soa();
        // A zone read only to be signed gets its chain from the signer:
        // none of its own is looked for, and none is said to be missing
        // (black-box finding DH-5: the warning told the operator to add
        // the NSEC3PARAM the signer makes).
        if self.served {
            built_zone.chain = DenialChain::of(&built_zone).map(Box::new);
        }
        let chain_problems = match self.warn && self.served {
            true => DenialChain::problems(&built_zone, built_zone.chain.as_deref()),
            false => Vec::new(),
        };
        problems.extend(chain_problems.into_iter().map(|message| Problem {
            severity: Severity::Warning,
            location: None,
            message,
        }));
        if self.warn && self.inner_dnames {
            let mut occluding = occluding_dnames(&built_zone);
            if !occluding.is_empty() {
                // One pass over the entries, whatever the DNAMEs' number.
                let dnames: HashMap<u64, &Entry> = (self.entries.iter())
                    .filter(|e| e.rtype == RType::DNAME.0)
                    .map(|e| (e.hash, e))
                    .collect();
                occluding.iter_mut().for_each(|(owner, problem)| {
                    let hash = built_zone.hasher.hash_one(&**owner);
                    let entry = dnames.get(&hash);
                    problem.location = entry.and_then(|e| dname_location(e, &self.files));
                });
            }
            problems.extend(occluding.into_iter().map(|(_, p)| p));
        }
        Ok((built_zone, problems))
    }

    fn logged(&self, e: &Entry) -> Logged<'_> {
        read(&self.logs, e)
    }

    /// Orders entries by shard, owner hash, owner, type, kind, and then as
    /// read (so RRsets keep the zone file's order), and returns the runs
    /// of entries with one owner: first into their shards, then each shard
    /// by itself, small enough to sort in cache. One sort of the whole log
    /// took 40% of building a 2M-record zone.
    /// Within a shard one integer key settles the order without reading
    /// the log (an owner's records are adjacent once sorted by its hash);
    /// reading it for every run of one hash was 5% of signing a zone. The
    /// log is read once per entry of such a run, to find the rare hash
    /// that two owners share.
    /// Shards are sorted on every core for large zones.
    fn sort_entries(&mut self, shards: usize) -> Vec<Draft> {
        let (mut entries, bounds) = group_by_shard(std::mem::take(&mut self.entries), shards);
        let threads = match entries.len() > PARALLEL_RECORDS {
            true => crate::cores().clamp(1, shards),
            false => 1,
        };
        // Each thread a run of whole shards, about as many entries each.
        let mut pieces: Vec<(usize, &mut [Entry])> = Vec::with_capacity(threads);
        let mut rest = &mut entries[..];
        let mut taken = 0;
        for t in 1..=threads {
            let aim = bounds[shards] * t / threads;
            let end = bounds[bounds.partition_point(|&b| b < aim).min(shards)];
            let (piece, after) = std::mem::take(&mut rest).split_at_mut(end - taken);
            pieces.push((taken, piece));
            (rest, taken) = (after, end);
        }
        let this = &*self;
        let bounds = &bounds;
        let drafts = match threads {
            1 => pieces
                .into_iter()
                .flat_map(|(from, piece)| this.sort_shards(from, piece, bounds))
                .collect(),
            _ => std::thread::scope(|scope| {
                let handles: Vec<_> = (pieces.into_iter())
                    .map(|(from, piece)| scope.spawn(move || this.sort_shards(from, piece, bounds)))
                    .collect();
                (handles.into_iter())
                    .flat_map(|h| h.join().expect("sorting does not panic"))
                    .collect()
            }),
        };
        self.entries = entries;
        drafts
    }

    /// Sorts the shards of `piece`, the entries from entry `from` on, whole
    /// shards of `bounds`; their drafts.
    fn sort_shards(&self, from: usize, piece: &mut [Entry], bounds: &[usize]) -> Vec<Draft> {
        let mut drafts = Vec::new();
        let first = bounds.partition_point(|&b| b < from);
        for shard in bounds[first..].windows(2) {
            if shard[1] > from + piece.len() {
                break;
            }
            let mut start = shard[0];
            let shard = &mut piece[shard[0] - from..shard[1] - from];
            shard.sort_unstable_by_key(Entry::order);
            for run in shard.chunk_by_mut(|a, b| a.hash == b.hash) {
                self.owner_drafts(run, start, &mut drafts);
                start += run.len();
            }
        }
        drafts
    }

    /// The drafts of `run`, entries of one owner hash from entry `start`:
    /// one, unless owners share the hash; the run is then ordered by owner.
    fn owner_drafts(&self, run: &mut [Entry], start: usize, drafts: &mut Vec<Draft>) {
        let owner = |e: &Entry| self.logged(e).owner;
        // A run of one entry (most owners of an unsigned zone) reads nothing.
        let one_owner = match run {
            [first, rest @ ..] if !rest.is_empty() => {
                let first = owner(first);
                rest.iter().all(|e| owner(e).eq_ignore_ascii_case(first))
            }
            _ => true,
        };
        if one_owner {
            drafts.push(Draft {
                start: start as u32,
                len: run.len() as u32,
            });
            return;
        }
        run.sort_unstable_by(|a, b| {
            cmp_ignore_case(owner(a), owner(b)).then(a.order().cmp(&b.order()))
        });
        let mut start = start;
        for same in run.chunk_by(|a, b| owner(a).eq_ignore_ascii_case(owner(b))) {
            drafts.push(Draft {
                start: start as u32,
                len: same.len() as u32,
            });
            start += same.len();
        }
    }

    /// Gives every missing ancestor between an owner and the apex an
    /// (empty) node; true if any was added (entries are then re-sorted).
    fn add_empty_non_terminals(&mut self, drafts: &[Draft], shards: usize) -> bool {
        let origin_len = self.origin.wire_len();
        let mut missing: HashSet<Box<[u8]>> = HashSet::new();
        let mut children: HashMap<Box<[u8]>, u32> = HashMap::new();
        let starts = draft_starts(&self.entries, drafts, shards);
        let hashes = draft_hashes(&self.entries, drafts);
        let lookup = Lookup {
            b: self,
            drafts,
            hashes: &hashes,
            shards,
            starts: &starts,
            logs: &self.logs,
        };
        for d in drafts
            .iter()
            .filter(|d| self.entries[d.start as usize].is_deep())
        {
            let owner = self.logged(&self.entries[d.start as usize]).owner;
            let mut name = owner;
            let mut lower = NameBuf::new();
            loop {
                let parent = &name[1 + name[0] as usize..];
                if parent.len() <= origin_len {
                    break;
                }
                lower.set(parent);
                lower.make_lowercase();
                // A parent met before is known, and so are its own: most
                // owners share theirs with siblings.
                if let Some(count) = children.get_mut(lower.as_wire()) {
                    *count += 1;
                    break;
                }
                let key: Box<[u8]> = lower.as_wire().into();
                let known = lookup.find(&key).is_some();
                if !known {
                    missing.insert(key.clone());
                }
                children.insert(key, 1);
                if known {
                    break;
                }
                name = parent;
            }
        }
        self.children = children;
        if missing.is_empty() {
            return false;
        }
        for name in &missing {
            self.push(name, RType(0), EMPTY, 0, &[], (0, 0));
        }
        true
    }
}

/// The entries by shard, shard 0 first (a counting sort), and the bounds
/// of each shard's range, `shards + 1` of them. Entries are copied out of
/// place: sorting them in place swapped each to a random spot, a cache
/// miss per entry that took a tenth of building a 2M-record zone.
///
/// The copy goes through buckets of whole shards (at most [`LOG_GROUPS`]),
/// so that no two lists of every entry are held at once: the list given
/// shrinks as it is read into the buckets, a block at a time from its end,
/// and each bucket is freed once its shards are in place.
fn group_by_shard(mut entries: Vec<Entry>, shards: usize) -> (Vec<Entry>, Vec<usize>) {
    if shards == 1 {
        let n = entries.len();
        return (entries, vec![0, n]);
    }
    let mut bounds = vec![0; shards + 1];
    for e in &entries {
        bounds[shard_of(e.hash, shards) + 1] += 1;
    }
    for i in 1..=shards {
        bounds[i] += bounds[i - 1];
    }
    let per_bucket = shards / shards.min(LOG_GROUPS);
    let mut buckets: Vec<Vec<Entry>> = (bounds.chunks(per_bucket))
        .zip(bounds[per_bucket..].iter().step_by(per_bucket))
        .map(|(first, end)| Vec::with_capacity(end - first[0]))
        .collect();
    let mut freed = Freed::default();
    while !entries.is_empty() {
        let keep = entries.len().saturating_sub(GROUPING_BLOCK);
        for e in entries.drain(keep..) {
            buckets[shard_of(e.hash, shards) / per_bucket].push(e);
        }
        let before = entries.capacity();
        entries.shrink_to_fit();
        freed.add((before - entries.capacity()) * size_of::<Entry>());
    }
    let mut grouped = Vec::with_capacity(bounds[shards]);
    let mut next = bounds.clone();
    for bucket in buckets {
        grouped.resize(grouped.len() + bucket.len(), Entry::default());
        for e in &bucket {
            let shard = shard_of(e.hash, shards);
            grouped[next[shard]] = *e;
            next[shard] += 1;
        }
        freed.drop_vec(bucket);
    }
    (grouped, bounds)
}

/// Entries moved into buckets at a time (768 KiB), the list then shrunk.
const GROUPING_BLOCK: usize = 1 << 15;

/// Bytes freed since free heap was last handed back to the kernel: the
/// allocator keeps what is freed for the thread that had it (glibc's
/// arenas; jemalloc's decays over seconds), so memory freed while a large
/// zone is built is handed back every [`RELEASE_AFTER_BYTES`], to be
/// taken again by what the build makes next.
#[derive(Default)]
struct Freed(usize);

impl Freed {
    /// Frees `v` first, so that a hand-back it brings about returns it too.
    fn drop_vec<T>(&mut self, v: Vec<T>) {
        let bytes = v.capacity() * size_of::<T>();
        drop(v);
        self.add(bytes);
    }

    fn add(&mut self, bytes: usize) {
        self.0 += bytes;
        if self.0 >= RELEASE_AFTER_BYTES {
            heron_sys::memory::release_free_heap();
            self.0 = 0;
        }
    }
}

/// The packing threads' results as one: shards in their places, and the
/// log that is left (the apex's group).
fn merge_packed(results: Vec<(Packed, Vec<Vec<u8>>)>) -> (Packed, Vec<Vec<u8>>) {
    let mut all = Packed {
        shards: Vec::new(),
        problems: Vec::new(),
        records: 0,
        referrers: Vec::new(),
        wildcards: false,
    };
    let mut left: Vec<Vec<u8>> = Vec::new();
    for (r, held) in results {
        all.shards.extend(r.shards);
        all.problems.extend(r.problems);
        all.records += r.records;
        all.referrers.extend(r.referrers);
        all.wildcards |= r.wildcards;
        left.resize_with(held.len(), Vec::new);
        for (mine, log) in left.iter_mut().zip(held) {
            if !log.is_empty() {
                *mine = log;
            }
        }
    }
    all.shards.sort_unstable_by_key(|(at, _)| *at);
    (all, left)
}

/// How the log keeps a record: a signature under the type it covers.
fn kind_of(rtype: RType, rdata: &[u8]) -> (RType, u8) {
    match rtype {
        RType::RRSIG if rdata.len() >= 2 => (RType(u16::from_be_bytes([rdata[0], rdata[1]])), SIG),
        t => (t, DATA),
    }
}

/// Why a record read from a zone file cannot be data of the zone at
/// `origin`: a warning if it is ignored (outside the zone), an error if it
/// makes the zone unusable. None for a record the zone takes.
pub(super) fn refusal(origin: &Name, class: Class, rec: &Record) -> Option<Problem> {
    let (severity, message) = if !rec.owner.is_subdomain_of(origin) {
        let msg = format!(
            "{} {} is outside the zone {}; ignored",
            rec.owner, rec.rtype, origin
        );
        (Severity::Warning, msg)
    } else if rec.class != class {
        let msg = format!("class {} differs from the zone's {}", rec.class, class);
        (Severity::Error, msg)
    } else if rec.rtype.is_meta() {
        let msg = format!("{} is a meta type and cannot be zone data", rec.rtype);
        (Severity::Error, msg)
    } else if rec.rdata.len() > u16::MAX as usize {
        let msg = format!("{} RDATA longer than 65535 octets", rec.rtype);
        (Severity::Error, msg)
    } else {
        return None;
    };
    Some(Problem {
        severity,
        location: Some(rec.location.clone()),
        message,
    })
}

/// Each draft's owner hash, in the drafts' order: a search reads them
/// from one array, not each from its entry (a cache miss a step; the
/// search was 8% of loading the root-like zone).
fn draft_hashes(entries: &[Entry], drafts: &[Draft]) -> Vec<u64> {
    (drafts.iter())
        .map(|d| entries[d.start as usize].hash)
        .collect()
}

/// Where each shard's drafts start, and last their end: `shards + 1`
/// indexes into `drafts`, in one pass (drafts are in shard order).
fn draft_starts(entries: &[Entry], drafts: &[Draft], shards: usize) -> Vec<usize> {
    let mut starts = Vec::with_capacity(shards + 1);
    for (i, d) in drafts.iter().enumerate() {
        let shard = shard_of(entries[d.start as usize].hash, shards);
        while starts.len() <= shard {
            starts.push(i);
        }
    }
    starts.resize(shards + 1, drafts.len());
    starts
}

/// Why a builder given more than [`MAX_LOG_BYTES`] in one log group
/// refuses the zone.
const TOO_LARGE: &str = "the zone is too large to build: a log group passed 4 GiB";

/// Where a problem is, for reporting in file and line order.
fn place(p: &Problem) -> Option<(&Path, u32)> {
    p.location.as_ref().map(|l| (l.file.as_ref(), l.line))
}

/// Compares wire names ignoring ASCII case.
fn cmp_ignore_case(a: &[u8], b: &[u8]) -> Ordering {
    a.iter()
        .map(u8::to_ascii_lowercase)
        .cmp(b.iter().map(u8::to_ascii_lowercase))
}

/// Finds drafts by owner while building.
struct Lookup<'a> {
    b: &'a ZoneBuilder,
    drafts: &'a [Draft],
    /// Each draft's owner hash, beside `drafts`.
    hashes: &'a [u64],
    /// Where each shard's drafts start.
    starts: &'a [usize],
    shards: usize,
    logs: &'a [Vec<u8>],
}

impl Lookup<'_> {
    /// Searches the owner's shard only: a search of every draft was a
    /// cache miss a step, 0.7 s of building a 2M-record zone.
    fn find(&self, lower: &[u8]) -> Option<Draft> {
        let hash = self.b.hasher.hash_one(lower);
        let shard = shard_of(hash, self.shards);
        let range = self.starts[shard]..self.starts[shard + 1];
        let first = range.start + self.hashes[range.clone()].partition_point(|&h| h < hash);
        let same = self.hashes[first..range.end]
            .iter()
            .take_while(|&&h| h == hash);
        let entry = |d: &Draft| &self.b.entries[d.start as usize];
        (self.drafts[first..].iter().zip(same))
            .map(|(d, _)| d)
            .find(|d| read(self.logs, entry(d)).owner.eq_ignore_ascii_case(lower))
            .copied()
    }
}

/// One RRset as collected from the log.
pub(super) struct SetParts<'a> {
    pub(super) rtype: RType,
    pub(super) ttl: u32,
    pub(super) rdatas: Vec<&'a [u8]>,
    pub(super) sig_ttl: u32,
    pub(super) sigs: Vec<&'a [u8]>,
    /// Where its first record was read (its first signature's, when it
    /// holds none).
    pub(super) first: Option<(u32, u32)>,
}

/// A node as collected from the log: RRsets in type order, duplicates
/// dropped.
#[derive(Default)]
pub(super) struct NodeParts<'a> {
    owner: &'a [u8],
    /// The first `used` are this node's; the rest are kept for their
    /// buffers, so that collecting nodes one after another allocates
    /// nothing.
    sets: Vec<SetParts<'a>>,
    used: usize,
    records: usize,
    /// Records whose TTL differs from their RRset's: (file, line, TTL, RRset TTL, type).
    ttl_differs: Vec<((u32, u32), u32, u32, RType)>,
}

impl<'a> NodeParts<'a> {
    /// A node of these RRsets (each holding records or signatures).
    pub(super) fn of(owner: &'a [u8], sets: Vec<SetParts<'a>>) -> NodeParts<'a> {
        NodeParts {
            owner,
            used: sets.len(),
            records: sets.iter().map(|s| s.rdatas.len() + s.sigs.len()).sum(),
            sets,
            ttl_differs: Vec::new(),
        }
    }

    fn sets(&self) -> &[SetParts<'a>] {
        &self.sets[..self.used]
    }

    pub(super) fn set(&self, rtype: RType) -> Option<&SetParts<'a>> {
        self.sets()
            .iter()
            .find(|s| s.rtype == rtype && !s.rdatas.is_empty())
    }

    fn clear(&mut self) {
        self.owner = &[];
        self.used = 0;
        self.records = 0;
        self.ttl_differs.clear();
    }

    /// Starts the next RRset.
    fn open_set(&mut self, rtype: RType) {
        if self.used == self.sets.len() {
            self.sets.push(SetParts {
                rtype,
                ttl: 0,
                rdatas: Vec::new(),
                sig_ttl: 0,
                sigs: Vec::new(),
                first: None,
            });
        }
        let set = &mut self.sets[self.used];
        set.rtype = rtype;
        set.ttl = 0;
        set.sig_ttl = 0;
        set.rdatas.clear();
        set.sigs.clear();
        set.first = None;
        self.used += 1;
    }

    /// Whether checking or packing the node needs its owner as a name.
    fn needs_owner_name(&self) -> bool {
        self.sets().iter().any(|s| {
            matches!(
                s.rtype,
                RType::SOA | RType::CNAME | RType::DNAME | RType::NS | RType::MX | RType::SRV
            )
        })
    }
}

/// A node read for another's sake (a target's addresses, a glue check),
/// its buffers reused from one read to the next: reading each into a new
/// one was two to four allocations per NS record.
type Scratch<'l> = std::cell::RefCell<NodeParts<'l>>;

/// (in-zone target, node whose additional section holds its addresses).
type Referral = (Box<[u8]>, Box<[u8]>);

/// The zone being packed.
struct Plan<'a> {
    b: &'a ZoneBuilder,
    drafts: &'a [Draft],
    shards: usize,
    /// Where each shard's drafts start (see [`draft_starts`]).
    starts: Vec<usize>,
    /// Beside `drafts` (see [`draft_hashes`]).
    hashes: Vec<u64>,
    /// Lower-cased origin.
    apex: Name,
    /// A grouped log's targets, gathered before packing frees it.
    targets: Option<Targets>,
}

/// What packing made.
struct Packed {
    /// Each with its place among the zone's shards.
    shards: Vec<(usize, Arc<Shard>)>,
    problems: Vec<Problem>,
    records: usize,
    referrers: Vec<Referral>,
    /// Some owner is a wildcard (`*.` first).
    wildcards: bool,
}

impl<'a> Plan<'a> {
    fn find(&self, lower: &[u8], logs: &[Vec<u8>]) -> Option<Draft> {
        Lookup {
            b: self.b,
            drafts: self.drafts,
            hashes: &self.hashes,
            shards: self.shards,
            starts: &self.starts,
            logs,
        }
        .find(lower)
    }

    fn location(&self, (file, line): (u32, u32)) -> Option<Location> {
        let file = self.b.files.get(file as usize)?;
        Some(Location {
            file: file.clone(),
            line,
        })
    }

    fn problem(
        &self,
        out: &mut Vec<Problem>,
        at: Option<(u32, u32)>,
        severity: Severity,
        message: String,
    ) {
        out.push(Problem {
            severity,
            location: at.and_then(|a| self.location(a)),
            message,
        });
    }

    /// A DS at the apex is the parent's record, put in the child by
    /// mistake: resolvers ask the parent for it, so it is served to no one
    /// who needs it (RFC 4035 2.4; BIND refuses such a zone, NSD hides it).
    fn apex_ds_warning(&self, node: &NodeParts, problems: &mut Vec<Problem>) {
        if let Some(ds) = node.set(RType::DS) {
            let msg = format!(
                "{}: DS at the zone's apex; a DS belongs in the parent zone, which resolvers \
                 ask for it: move it there",
                self.apex
            );
            self.problem(problems, ds.first, Severity::Warning, msg);
        }
    }

    /// Signatures over a type the name lacks (a pre-signed zone edited by
    /// hand: an RRset removed, its RRSIG left) sign nothing; they are
    /// transferred and answered to QTYPE RRSIG, as NSD, Knot and BIND
    /// serve them, and said, as other dead data is.
    fn orphan_sigs_warning(&self, node: &NodeParts, problems: &mut Vec<Problem>) {
        let orphans = |s: &&SetParts| s.rdatas.is_empty() && !s.sigs.is_empty();
        for set in node.sets().iter().filter(orphans) {
            let owner = Name::from_wire(node.owner).expect("read as a name");
            let rtype = set.rtype;
            let msg = format!(
                "{owner}: RRSIG over {rtype}, which the name does not have: it signs nothing \
                 (its RRset removed?); served as it is, unless Heron signs the zone"
            );
            self.problem(problems, set.first, Severity::Warning, msg);
        }
    }

    /// Collects a node's records, duplicates dropped (RFC 2181 5), each
    /// RRset keeping its first TTL (RFC 2181 5.2).
    fn parts<'l>(&self, d: Draft, logs: &'l [Vec<u8>]) -> NodeParts<'l> {
        let mut node = NodeParts::default();
        self.collect(d, &mut node, logs);
        node
    }

    /// [`Plan::parts`] into a reused `node`.
    fn collect<'l>(&self, d: Draft, node: &mut NodeParts<'l>, logs: &'l [Vec<u8>]) {
        let entries = &self.b.entries[d.start as usize..(d.start + d.len) as usize];
        node.clear();
        for e in entries {
            let rec = read(logs, e);
            if node.owner.is_empty() || (rec.kind == DATA && node.records == 0) {
                node.owner = rec.owner;
            }
            if rec.kind == EMPTY {
                continue;
            }
            if node.sets().last().is_none_or(|s| s.rtype != rec.rtype) {
                node.open_set(rec.rtype);
            }
            let set = &mut node.sets[node.used - 1];
            let (list, is_sig) = match rec.kind {
                SIG => (&mut set.sigs, true),
                _ => (&mut set.rdatas, false),
            };
            // A signature's entry carries the type it covers; it compares
            // as RRSIG (its signer's name without case, RFC 4034 6.2).
            let as_type = if is_sig { RType::RRSIG } else { rec.rtype };
            if list.iter().any(|r| rdata_equal(as_type, r, rec.rdata)) {
                // A duplicate of another TTL is said, as BIND and NSD do.
                if !is_sig && rec.ttl != set.ttl {
                    node.ttl_differs
                        .push(((e.file(), e.line), rec.ttl, set.ttl, rec.rtype));
                }
                continue;
            }
            if list.is_empty() {
                if is_sig {
                    set.sig_ttl = rec.ttl;
                    // Said for signatures over nothing; the first record,
                    // when there is one, takes its place.
                    set.first = set.first.or(Some((e.file(), e.line)));
                } else {
                    set.ttl = rec.ttl;
                    set.first = Some((e.file(), e.line));
                }
            }
            list.push(rec.rdata);
            node.records += 1;
            if is_sig {
                set.sig_ttl = set.sig_ttl.min(rec.ttl);
            } else if rec.ttl != set.ttl {
                let ttl = set.ttl;
                node.ttl_differs
                    .push(((e.file(), e.line), rec.ttl, ttl, rec.rtype));
            }
        }
    }

    /// Packs every shard, on every core for large zones; gives back what
    /// is left of the log (the apex's group, the rest freed).
    ///
    /// Shards are packed by unit: unit `u` of `units` (the lesser of the
    /// groups and the shards) is every shard and every log group whose
    /// number is `u` modulo `units`, so a unit's shards read only its
    /// groups' logs, which are freed once the unit is packed.
    fn pack(&self, mut logs: Vec<Vec<u8>>) -> (Packed, Vec<Vec<u8>>) {
        let bounds = &self.starts;
        let units = logs.len().min(self.shards);
        let threads = if self.b.entries.len() > PARALLEL_RECORDS {
            crate::cores().min(units)
        } else {
            1
        };
        if threads == 1 {
            // A thread per zone would cost more than packing a small zone.
            return self.pack_units(0..units, units, logs, bounds);
        }
        let share = |t: usize| (t * units / threads)..((t + 1) * units / threads);
        // Each thread owns the logs of its units.
        let held: Vec<Vec<Vec<u8>>> = (0..threads)
            .map(|t| {
                let mine = |g: usize| share(t).contains(&(g % units));
                (0..logs.len())
                    .map(|g| match mine(g) {
                        true => std::mem::take(&mut logs[g]),
                        false => Vec::new(),
                    })
                    .collect()
            })
            .collect();
        let results: Vec<(Packed, Vec<Vec<u8>>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (held.into_iter().enumerate())
                .map(|(t, held)| {
                    scope.spawn(move || self.pack_units(share(t), units, held, bounds))
                })
                .collect();
            (handles.into_iter())
                .map(|h| h.join().expect("packing does not panic"))
                .collect()
        });
        merge_packed(results)
    }

    /// Packs the shards of `mine` (units of `units`) from `held`, the logs
    /// of those units, each unit's logs freed once it is packed except the
    /// apex's group, which comes back.
    fn pack_units(
        &self,
        mine: std::ops::Range<usize>,
        units: usize,
        mut held: Vec<Vec<u8>>,
        bounds: &[usize],
    ) -> (Packed, Vec<Vec<u8>>) {
        let mut out = Packed {
            shards: Vec::with_capacity(self.shards.div_ceil(units) * mine.len()),
            problems: Vec::new(),
            records: 0,
            referrers: Vec::new(),
            wildcards: false,
        };
        let apex_group = shard_of(self.b.hasher.hash_one(self.apex.as_wire()), held.len());
        let mut freed = Freed::default();
        for unit in mine {
            let mut scratch = NodeParts::default();
            for s in (unit..self.shards).step_by(units) {
                let shard = self.pack_shard(&bounds[s..s + 2], &held, &mut scratch, &mut out);
                out.shards.push((s, shard));
            }
            drop(scratch);
            // Handed back as it goes, the log shrinks as the zone grows.
            for g in (unit..held.len()).step_by(units) {
                if g != apex_group {
                    freed.drop_vec(std::mem::take(&mut held[g]));
                }
            }
        }
        // In shard order (one unit's shards already are).
        if units > 1 {
            out.shards.sort_unstable_by_key(|(at, _)| *at);
        }
        (out, held)
    }

    /// Packs the shard whose drafts lie between `bounds[0]` and `bounds[1]`.
    /// `scratch` is reused from node to node.
    fn pack_shard<'l>(
        &self,
        bounds: &[usize],
        logs: &'l [Vec<u8>],
        scratch: &mut NodeParts<'l>,
        out: &mut Packed,
    ) -> Arc<Shard> {
        let drafts = &self.drafts[bounds[0]..bounds[1]];
        let mut arena = Vec::with_capacity(self.arena_estimate(drafts, logs));
        let mut table = NodeTable::with_capacity(drafts.len());
        let lookups = Scratch::default();
        for &d in drafts {
            let at = arena.len();
            let hash = self.b.entries[d.start as usize].hash;
            self.collect(d, scratch, logs);
            out.records += self.pack_node(scratch, &mut arena, logs, &lookups, out);
            table.insert_unique(hash, at as u32);
        }
        Arc::new(Shard {
            arena: arena.into(),
            table,
        })
    }

    /// About what these nodes take in an arena: their records as logged
    /// (packing drops each record's owner, compresses names and adds a
    /// node and RRset header).
    /// This first read of the shard's records, which lie all over the log,
    /// prefetches a few records ahead; packing then finds them in cache.
    fn arena_estimate(&self, drafts: &[Draft], logs: &[Vec<u8>]) -> usize {
        let (Some(first), Some(last)) = (drafts.first(), drafts.last()) else {
            return 0;
        };
        let entries = &self.b.entries[first.start as usize..(last.start + last.len) as usize];
        let mut logged = 0;
        for (i, e) in entries.iter().enumerate() {
            if let Some(ahead) = entries.get(i + LOG_PREFETCH_AHEAD) {
                prefetch(&logs[shard_of(ahead.hash, logs.len())][ahead.at as usize..]);
            }
            logged += logged_len(&read(logs, e));
        }
        logged + 32 * drafts.len()
    }

    /// Every in-zone name an NS, MX or SRV record names, with what
    /// packing needs of it, read while the whole log is here.
    fn gather_targets(&self, logs: &[Vec<u8>]) -> Targets {
        let apex = self.apex.as_wire();
        let mut names: Vec<Box<[u8]>> = Vec::new();
        for e in self.b.entries.iter().filter(|e| e.names_target()) {
            let rec = read(logs, e);
            if let Some(target) = rdata::names_for_additional(rec.rtype, rec.rdata) {
                let mut lower: Box<[u8]> = target.into();
                lowercase_wire(&mut lower);
                if lower.ends_with(apex) {
                    names.push(lower);
                }
            }
        }
        let lookups = Scratch::default();
        Targets::gather(names, |lower, emit| {
            self.addresses(lower, emit, logs, &lookups)
        })
    }

    /// The addresses (A, then AAAA) the zone holds for a lower-cased name,
    /// each with its RRSIGs unless glue; false if there is no such name.
    fn addresses<'l>(
        &self,
        lower: &[u8],
        emit: Emit,
        logs: &'l [Vec<u8>],
        lookups: &Scratch<'l>,
    ) -> bool {
        let Some(d) = self.find(lower, logs) else {
            return false;
        };
        let mut target = lookups.borrow_mut();
        self.collect(d, &mut target, logs);
        for rtype in [RType::A, RType::AAAA] {
            if let Some(set) = target.set(rtype) {
                let glue = !set.sigs.is_empty() && self.at_or_below_cut(lower, logs);
                emit((rtype, set.ttl, &set.rdatas), signatures(set, glue));
            }
        }
        true
    }

    /// Checks one node and appends it to `arena`; returns its record count.
    /// `lookups` is for reading the nodes it names.
    fn pack_node<'l>(
        &self,
        node: &NodeParts,
        arena: &mut Vec<u8>,
        logs: &'l [Vec<u8>],
        lookups: &Scratch<'l>,
        out: &mut Packed,
    ) -> usize {
        let mut key = NameBuf::new();
        key.set(node.owner);
        key.make_lowercase();
        let is_apex = key.as_wire() == self.apex.as_wire();
        out.wildcards |= is_wildcard(key.as_wire());
        let ttl_differs = if self.b.warn {
            &node.ttl_differs[..]
        } else {
            &[]
        };
        for &(at, ttl, first, rtype) in ttl_differs {
            let msg = format!(
                "TTL {ttl} differs from the TTL {first} of the {rtype} RRset; using {first}"
            );
            self.problem(&mut out.problems, Some(at), Severity::Warning, msg);
        }
        if is_apex && self.b.warn {
            self.apex_ds_warning(node, &mut out.problems);
        }
        if self.b.warn {
            self.orphan_sigs_warning(node, &mut out.problems);
        }
        let is_cut = !is_apex && node.set(RType::NS).is_some();
        // Most nodes (addresses, text) need no name object: no allocation.
        let owner = node
            .needs_owner_name()
            .then(|| Name::from_wire(node.owner).expect("read as a name"));
        let apex = self.apex.as_wire();
        if let Some(owner) = &owner {
            for (at, msg) in node_errors(node, owner, is_apex) {
                self.problem(&mut out.problems, at, Severity::Error, msg);
            }
            if is_cut && self.b.warn {
                self.check_glue(node, owner, logs, lookups, &mut out.problems);
            }
            if self.b.warn {
                self.check_targets(node, owner, (logs, lookups), &mut out.problems);
            }
            let targets = self.b.served.then(|| in_zone_targets(node, apex));
            for target in targets.into_iter().flatten() {
                out.referrers.push((target, key.as_wire().into()));
            }
        }
        let addresses = |lower: &[u8], emit: Emit| match &self.targets {
            Some(targets) => targets.addresses(lower, emit),
            None => self.addresses(lower, emit, logs, lookups),
        };
        let glue_left_out = std::cell::Cell::new(0);
        let block = |set: &SetParts, encoded: EncodedRef| match &owner {
            Some(owner) if self.b.served => {
                let block = additional_block(set, encoded, owner, is_cut, &addresses);
                glue_left_out.set(glue_left_out.get() + block.required_left_out());
                block
            }
            _ => AdditionalBlock::default(),
        };
        let written = write_node(arena, node, key.as_wire(), is_cut, apex, block);
        if let Err(set) = written {
            let owner = Name::from_wire(node.owner).expect("read as a name");
            let msg = format!("{owner} {}: {RRSET_TOO_LARGE}", set.rtype);
            self.problem(&mut out.problems, set.first, Severity::Error, msg);
        }
        if let (Some(owner), n @ 1..) = (&owner, glue_left_out.get())
            && self.b.warn
        {
            let first = node.set(RType::NS).and_then(|s| s.first);
            let msg = format!(
                "{owner} NS: {n} glue RRsets do not fit in what Heron keeps for a referral \
                 (64 KiB): referrals carry the rest only"
            );
            self.problem(&mut out.problems, first, Severity::Warning, msg);
        }
        node.records
    }

    /// Exactly one SOA and some NS at the apex.
    fn check_apex(&self, apex: &NodeParts, logs: &[Vec<u8>], problems: &mut Vec<Problem>) {
        let origin = &self.b.origin;
        let soa = apex.set(RType::SOA);
        match soa.map_or(0, |s| s.rdatas.len()) {
            0 => {
                let msg = format!("no SOA record at the zone apex {origin}");
                self.problem(problems, None, Severity::Error, msg);
            }
            1 => {}
            n => {
                let msg = format!("{n} SOA records at the apex {origin}; exactly one is allowed");
                self.problem(problems, soa.and_then(|s| s.first), Severity::Error, msg);
            }
        }
        let Some(ns) = apex.set(RType::NS) else {
            let msg = format!("no NS records at the zone apex {origin}");
            self.problem(problems, None, Severity::Error, msg);
            return;
        };
        for msg in below_apex_dname(apex, origin) {
            self.problem(problems, ns.first, Severity::Error, msg);
        }
        // A name server named inside the zone is found through this zone
        // alone: without an address here nobody reaches it.
        let lookups = Scratch::default();
        for target in ns.rdatas.iter().filter_map(|t| Name::from_wire(t).ok()) {
            let in_zone = target.is_subdomain_of(origin);
            if in_zone && !self.has_address(target.as_wire(), logs, &lookups) {
                let msg = format!(
                    "name server {target} of {origin} is in the zone but has no address (A/AAAA)"
                );
                self.problem(problems, ns.first, Severity::Warning, msg);
            }
        }
    }

    /// Whether a lower-cased name in the zone is a delegation or below
    /// one: its data there is glue, not the zone's (RFC 4035 2.2).
    fn at_or_below_cut(&self, lower: &[u8], logs: &[Vec<u8>]) -> bool {
        let apex_len = self.apex.wire_len();
        suffixes(lower).take_while(|s| s.len() > apex_len).any(|s| {
            self.find(s, logs)
                .is_some_and(|d| self.parts(d, logs).set(RType::NS).is_some())
        })
    }

    /// Whether the zone holds an A or AAAA record for `name` (wire, any
    /// case), an NS target.
    fn has_address<'l>(&self, name: &[u8], logs: &'l [Vec<u8>], lookups: &Scratch<'l>) -> bool {
        let mut lower = NameBuf::new();
        lower.set(name);
        lower.make_lowercase();
        if let Some(targets) = &self.targets {
            return targets.has_address(lower.as_wire());
        }
        self.find(lower.as_wire(), logs).is_some_and(|d| {
            let mut target = lookups.borrow_mut();
            self.collect(d, &mut target, logs);
            target.set(RType::A).is_some() || target.set(RType::AAAA).is_some()
        })
    }

    /// An NS target at or below a delegation of this zone needs an address
    /// here, or nobody can reach that name server.
    fn check_glue<'l>(
        &self,
        node: &NodeParts,
        cut: &Name,
        logs: &'l [Vec<u8>],
        lookups: &Scratch<'l>,
        problems: &mut Vec<Problem>,
    ) {
        let ns = node.set(RType::NS).expect("a cut has NS");
        let apex = self.apex.as_wire();
        for &target in &ns.rdatas {
            let below = ends_with_name(target, cut.as_wire());
            // One in the zone above the cut is the zone's own data: found
            // here alone, as an apex name server is (black-box finding
            // AT-2: BIND and kzonecheck say it, Heron said nothing).
            let in_zone = below || ends_with_name(target, apex);
            if !in_zone || self.has_address(target, logs, lookups) {
                continue;
            }
            if !below && !self.lame_in_zone(target, logs, lookups) {
                continue;
            }
            if let Ok(target) = Name::from_wire(target) {
                let msg = match below {
                    true => format!("delegation {cut} to {target} has no glue address (A/AAAA)"),
                    false => format!(
                        "delegation {cut} to {target}: the name server is in the zone but has no address (A/AAAA)"
                    ),
                };
                self.problem(problems, ns.first, Severity::Warning, msg);
            }
        }
    }

    /// An NS or MX target that is an alias (RFC 2181 10.3: resolvers take
    /// such a delegation as lame; BIND calls it illegal), and NS records
    /// owned by a wildcard (BIND refuses them; NSD and Knot answer them
    /// differently): loaded, with a warning (black-box finding AT-2).
    fn check_targets<'l>(
        &self,
        node: &NodeParts,
        owner: &Name,
        (logs, lookups): (&'l [Vec<u8>], &Scratch<'l>),
        problems: &mut Vec<Problem>,
    ) {
        let apex = self.apex.as_wire();
        for rtype in [RType::NS, RType::MX] {
            let Some(set) = node.set(rtype) else {
                continue;
            };
            if rtype == RType::NS && owner.as_wire().starts_with(b"\x01*") {
                let msg = format!(
                    "{owner} NS: a wildcard owns NS records, which servers answer differently (BIND refuses them)"
                );
                self.problem(problems, set.first, Severity::Warning, msg);
            }
            for rd in &set.rdatas {
                let Some(target) = rdata::names_for_additional(rtype, rd) else {
                    continue;
                };
                if ends_with_name(target, apex) && self.is_alias(target, logs, lookups) {
                    let target = Name::from_wire(target).map_or(String::new(), |t| t.to_string());
                    let msg = format!(
                        "{owner} {rtype} {target}: the target is a CNAME (RFC 2181 10.3: it must not be)"
                    );
                    self.problem(problems, set.first, Severity::Warning, msg);
                }
            }
        }
    }

    /// Whether `target` (wire), a delegation's name server in the zone
    /// above the cut with no address, is lame: not an alias (said so by
    /// `check_targets`), not below another delegation (that one's glue),
    /// not covered by a wildcard (regression hunt AX-2: warned of, where
    /// BIND and Knot are silent). Not told in a zone packed in groups
    /// (no lookups there; regression hunt AX-1): not warned of then.
    fn lame_in_zone<'l>(&self, target: &[u8], logs: &'l [Vec<u8>], lookups: &Scratch<'l>) -> bool {
        if self.targets.is_some() || self.is_alias(target, logs, lookups) {
            return false;
        }
        let mut lower = NameBuf::new();
        lower.set(target);
        lower.make_lowercase();
        let lower = lower.as_wire();
        let apex_len = self.apex.wire_len();
        let wildcard = suffixes(lower)
            .skip(1)
            .take_while(|s| s.len() >= apex_len)
            .any(|s| {
                let star = [&[1, b'*'][..], s].concat();
                self.find(&star, logs).is_some()
            });
        !wildcard && !self.at_or_below_cut(lower, logs)
    }

    /// Whether the zone holds a CNAME at `name` (wire, any case). Not
    /// known when the zone is packed in groups from a targets' index of
    /// addresses alone (a large zone): false then, and such a target
    /// without an address is said as one.
    fn is_alias<'l>(&self, name: &[u8], logs: &'l [Vec<u8>], lookups: &Scratch<'l>) -> bool {
        if self.targets.is_some() {
            return false;
        }
        let mut lower = NameBuf::new();
        lower.set(name);
        lower.make_lowercase();
        self.find(lower.as_wire(), logs).is_some_and(|d| {
            let mut target = lookups.borrow_mut();
            self.collect(d, &mut target, logs);
            target.set(RType::CNAME).is_some()
        })
    }
}

/// The RRSIGs over an address RRset that an additional section carries:
/// none for glue (`glue`), which a signed zone does not sign; a zone that
/// signs it anyway is not believed.
pub(super) fn signatures<'s>(set: &'s SetParts, glue: bool) -> Signatures<'s> {
    match glue {
        true => (0, &[]),
        false => (set.sig_ttl, &set.sigs),
    }
}

/// Where the DNAME record of `entry` was read.
fn dname_location(entry: &Entry, files: &[Arc<Path>]) -> Option<Location> {
    Some(Location {
        file: files.get(entry.file() as usize)?.clone(),
        line: entry.line,
    })
}

/// A warning for each DNAME with names below it, the apex's too (black-box
/// finding DK-2): those are never served (RFC 6672 2.4; NSD and Knot
/// refuse such a zone, BIND loads it as Heron does). Looked at in the built zone, whose packing is done;
/// each with the DNAME's owner, lower-cased, to find its line by.
fn occluding_dnames(zone: &Zone) -> Vec<(Vec<u8>, Problem)> {
    let apex = zone.origin().as_wire();
    let mut lower = NameBuf::new();
    let mut out = Vec::new();
    for node in zone.nodes().filter(|n| n.has_dname()) {
        lower.set(node.owner_wire());
        lower.make_lowercase();
        // Children are counted below the apex only: every other node is
        // the apex's.
        let below = match lower.as_wire() == apex {
            true => zone.node_count() > 1,
            false => zone.has_children(lower.as_wire()),
        };
        if !below {
            continue;
        }
        let message = format!(
            "{}: DNAME with names below it, which are never served (RFC 6672 2.4; NSD and \
             Knot refuse the zone): remove them or the DNAME",
            node.owner()
        );
        let problem = Problem {
            severity: Severity::Warning,
            location: None,
            message,
        };
        out.push((lower.as_wire().to_vec(), problem));
    }
    out
}

/// Errors in one node's data: SOA away from the apex, a CNAME beside other
/// data or more than one, more than one DNAME. Each with where its RRset's
/// first record was read.
pub(super) fn node_errors(
    node: &NodeParts,
    owner: &Name,
    is_apex: bool,
) -> Vec<(Option<(u32, u32)>, String)> {
    let mut out = Vec::new();
    if let Some(soa) = node.set(RType::SOA).filter(|_| !is_apex) {
        let msg = format!("SOA record at {owner}, which is not the zone apex");
        out.push((soa.first, msg));
    }
    if let Some(cname) = node.set(RType::CNAME) {
        if cname.rdatas.len() > 1 {
            out.push((cname.first, format!("{owner}: more than one CNAME record")));
        }
        let others: Vec<String> = node
            .sets()
            .iter()
            .filter(|s| !s.rdatas.is_empty())
            .map(|s| s.rtype)
            .filter(|t| !matches!(*t, RType::CNAME | RType::NSEC | RType::RRSIG))
            .map(|t| t.to_string())
            .collect();
        if !others.is_empty() {
            let msg = format!("{owner}: CNAME beside other data ({})", others.join(", "));
            out.push((cname.first, msg));
        }
    }
    if let Some(dname) = node.set(RType::DNAME).filter(|d| d.rdatas.len() > 1) {
        out.push((dname.first, format!("{owner}: more than one DNAME record")));
    }
    out
}

/// The lower-cased names inside the zone (at or below `apex`) that the
/// node's NS, MX and SRV records point at: the names whose addresses its
/// additional sections carry, so a change to them means packing it again.
pub(super) fn in_zone_targets(node: &NodeParts, apex: &[u8]) -> Vec<Box<[u8]>> {
    let mut out: Vec<Box<[u8]>> = Vec::new();
    for set in node.sets() {
        if !matches!(set.rtype, RType::NS | RType::MX | RType::SRV) {
            continue;
        }
        for rd in &set.rdatas {
            let Some(target) = rdata::names_for_additional(set.rtype, rd) else {
                continue;
            };
            let mut lower: Box<[u8]> = target.into();
            lowercase_wire(&mut lower);
            // A wire suffix match; the rare false match (a label ending in
            // the apex's bytes) only costs an extra repack in `apply`.
            if lower.ends_with(apex) && !out.contains(&lower) {
                out.push(lower);
            }
        }
    }
    out
}

/// Appends a node to `arena`; `block` gives each RRset's additional
/// block. On an RRset too large to store, that RRset comes back.
/// Problems of one severity reported of a zone at most: a zone of 20,000
/// delegations without glue (a primary's, received by transfer) would
/// otherwise log 20,000 lines at each transfer and each start.
pub const MAX_PROBLEMS: usize = 100;

/// Keeps the first [`MAX_PROBLEMS`] errors and warnings, and says how
/// many more of each there were.
fn keep_first_problems(problems: &mut Vec<Problem>) {
    for (severity, word) in [(Severity::Error, "errors"), (Severity::Warning, "warnings")] {
        let mut seen = 0;
        problems.retain(|p| {
            seen += usize::from(p.severity == severity);
            p.severity != severity || seen <= MAX_PROBLEMS
        });
        if seen > MAX_PROBLEMS {
            problems.push(Problem {
                severity,
                location: None,
                message: format!("{} more {word} not shown", seen - MAX_PROBLEMS),
            });
        }
    }
}

/// The name servers of the apex `apex` (of zone `origin`) named below an
/// apex DNAME, which redirects them: none could be reached (BIND, NSD and
/// Knot refuse such a zone too). One error each.
pub(super) fn below_apex_dname(apex: &NodeParts, origin: &Name) -> Vec<String> {
    let (Some(_), Some(ns)) = (apex.set(RType::DNAME), apex.set(RType::NS)) else {
        return Vec::new();
    };
    (ns.rdatas.iter().filter_map(|t| Name::from_wire(t).ok()))
        .filter(|target| target.is_subdomain_of(origin) && target != origin)
        .map(|target| {
            format!("name server {target} of {origin} is below the apex DNAME, which redirects it")
        })
        .collect()
}

pub(super) fn write_node<'n, 'a>(
    arena: &mut Vec<u8>,
    node: &'n NodeParts<'a>,
    key: &[u8],
    is_cut: bool,
    apex: &[u8],
    block: impl Fn(&SetParts, EncodedRef) -> AdditionalBlock,
) -> Result<(), &'n SetParts<'a>> {
    let mut w = NodeWriter::begin(arena, key, node.owner, is_cut);
    let names = Names { apex, owner: key };
    for set in node.sets() {
        // Where the RRset went: its block reads the targets' places there.
        let packed = std::cell::Cell::new(0..0);
        w.rrset(
            set.rtype,
            [
                &mut |out| {
                    let start = out.len();
                    pack_rrset(set.rtype, set.ttl, &set.rdatas, names, out);
                    packed.set(start..out.len());
                },
                &mut |out| pack_rrset(RType::RRSIG, set.sig_ttl, &set.sigs, names, out),
                &mut |out| {
                    let block = block(set, EncodedRef::new(&out[packed.take()]));
                    block.pack(out)
                },
            ],
        )
        .map_err(|_| set)?;
    }
    Ok(())
}

/// For NS, MX and SRV: the addresses of the targets the zone holds
/// (glue below a delegation included), encoded for responses.
/// `encoded` is the RRset as packed (the targets' places in it);
/// `addresses` looks a lower-cased target up in the zone.
pub(super) fn additional_block(
    set: &SetParts,
    encoded: EncodedRef,
    owner: &Name,
    is_cut: bool,
    addresses: &dyn Fn(&[u8], Emit) -> bool,
) -> AdditionalBlock {
    if !matches!(set.rtype, RType::NS | RType::MX | RType::SRV) || set.rdatas.is_empty() {
        return AdditionalBlock::default();
    }
    let delegation = is_cut && set.rtype == RType::NS;
    let targets = match delegation {
        true => set.rdatas.len(),
        false => set.rdatas.len().min(MAX_ADDITIONAL_TARGETS),
    };
    let mut block = AdditionalBlock::for_targets(targets);
    // The target name's offset in a record: past TYPE CLASS TTL RDLENGTH
    // (10 octets) and the RDATA's leading numbers.
    let name_offset = 10
        + match set.rtype {
            RType::MX => 2,
            RType::SRV => 6,
            _ => 0,
        };
    // The targets found so far; the optional ones at most
    // MAX_ADDITIONAL_TARGETS.
    let mut seen = SeenTargets::default();
    let mut optional = 0;
    let mut lower = NameBuf::new();
    // Required glue first: optional addresses ahead of it took the room
    // it needed, and a referral that fits was truncated (black-box
    // finding DA-1; Knot writes in-domain glue first too).
    let passes: &[bool] = if delegation { &[true, false] } else { &[false] };
    for &pass in passes {
        for (k, rd) in set.rdatas.iter().enumerate() {
            let Some(target) = rdata::names_for_additional(set.rtype, rd) else {
                continue;
            };
            // Glue for a name server inside the delegated zone is required
            // (RFC 9471), all of it: without it the referral cannot be
            // followed (black-box finding BI-1: only 16 names' glue was
            // given, and no TC). Other addresses are optional.
            let required = delegation && ends_with_name(target, owner.as_wire());
            let room = required || optional < MAX_ADDITIONAL_TARGETS;
            if required != pass || !room || seen.holds(target) {
                continue;
            }
            lower.set(target);
            lower.make_lowercase();
            let at = encoded.name_position(k, name_offset);
            let found = addresses(lower.as_wire(), &mut |set, sigs| {
                block.push(at, set, sigs, required);
            });
            if found {
                seen.add(target, lower.as_wire());
                optional += usize::from(!required);
            }
        }
    }
    block
}

/// Additional targets already in a block. A delegation's name servers may
/// be thousands: past a few, they are looked up by their lower-cased name
/// rather than compared one by one.
#[derive(Default)]
struct SeenTargets<'a> {
    few: Vec<&'a [u8]>,
    many: HashSet<Vec<u8>>,
}

impl<'a> SeenTargets<'a> {
    const FEW: usize = 16;

    fn holds(&self, target: &[u8]) -> bool {
        if self.many.is_empty() {
            return self.few.iter().any(|s| s.eq_ignore_ascii_case(target));
        }
        self.many.contains(&target.to_ascii_lowercase())
    }

    fn add(&mut self, target: &'a [u8], lower: &[u8]) {
        if self.few.len() < Self::FEW {
            self.few.push(target);
            return;
        }
        if self.many.is_empty() {
            self.many = self.few.iter().map(|s| s.to_ascii_lowercase()).collect();
        }
        self.many.insert(lower.to_vec());
    }
}

/// The SOA's TTL in negative answers: the lesser of its own and its
/// MINIMUM field (RFC 2308 5); its signatures' TTLs are capped likewise.
pub(super) fn negative_ttl(apex_node: &NodeParts) -> u32 {
    let soa = apex_node.set(RType::SOA).expect("checked at build");
    soa.ttl.min(soa_field(soa.rdatas[0], 4))
}

pub(super) use heron_proto::rdata::rdata_equal;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zonefile::{ReadOptions, read_file_text};

    /// `text` built with its log split from the first record
    /// (`group_from` 0) or never (`usize::MAX`).
    fn built(
        text: &str,
        origin: &str,
        group_from: usize,
        hasher: &DefaultHashBuilder,
    ) -> (Zone, Vec<String>) {
        let origin = Name::parse(origin).unwrap();
        let mut b = ZoneBuilder::new(origin.clone(), Class::IN);
        b.hasher = hasher.clone();
        b.group_from = group_from;
        let path = Path::new("test.zone");
        let opts = ReadOptions::new(origin);
        let errors = read_file_text(text.as_bytes(), path, &opts, &mut |r| b.add(r));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(b.logs.len(), if group_from == 0 { LOG_GROUPS } else { 1 });
        let (zone, warnings) = b.build().unwrap_or_else(|p| panic!("{p:?}"));
        let mut warnings: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
        warnings.sort();
        (zone, warnings)
    }

    /// An RRset past what a node stores is refused with its type and the
    /// limit in terms of any type: 240 TXT records of a 255-octet string
    /// are stored, 241 are not (black-box finding BI-2: the message spoke
    /// of A records).
    #[test]
    fn an_rrset_too_large_to_store_is_refused_whatever_its_type() {
        let string = "x".repeat(255);
        let zone = |n: usize| {
            let mut text = String::from("@ 60 SOA ns h 1 2 3 4 5\n@ 60 NS ns\nns 60 A 192.0.2.1\n");
            for i in 0..n {
                text.push_str(&format!("t 60 TXT \"{i:03}{}\"\n", &string[3..]));
            }
            crate::load_zone_str(&text, "t.zone", &Name::parse("t.test").unwrap())
        };
        assert!(zone(240).is_ok());
        let problems = zone(241).err().expect("refused");
        let message = &problems[0].message;
        assert!(
            message.contains("t.t.test. TXT: the RRset is too large"),
            "{message}"
        );
        assert!(message.contains("240 TXT records"), "{message}");
    }

    /// A builder without warnings finds errors still, and builds the same
    /// zone as one with them.
    #[test]
    fn a_builder_without_warnings_still_refuses_errors() {
        let origin = Name::parse("w.test").unwrap();
        let build = |text: &str, warn: bool| {
            let mut b = ZoneBuilder::new(origin.clone(), Class::IN);
            if !warn {
                b = b.without_warnings();
            }
            let opts = ReadOptions::new(origin.clone());
            read_file_text(text.as_bytes(), Path::new("w"), &opts, &mut |r| b.add(r));
            b.build()
        };
        let glueless = "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n\
            sub NS ns.sub\nx A 192.0.2.2\nx 30 A 192.0.2.3\n";
        let (with, warnings) = build(glueless, true).unwrap();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        let (without, none) = build(glueless, false).unwrap();
        assert!(none.is_empty(), "{none:?}");
        assert!(crate::diff::diff(&with, &without).is_empty());
        let broken = "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n\
            c CNAME x\nc A 192.0.2.4\n";
        let errors = build(broken, false).expect_err("refused");
        assert!(
            errors
                .iter()
                .any(|e| e.to_string().contains("CNAME beside")),
            "{errors:?}"
        );
    }

    /// A zone read only to be signed has the same records and warnings
    /// as one read to serve, and none of what only serving reads: no
    /// additional block, no index of the nodes naming a target. Both
    /// ways, grouped logs too (a large zone's).
    #[test]
    fn a_zone_read_only_to_sign_has_its_records_and_warnings_only() {
        let origin = Name::parse("s.test").unwrap();
        let text = "$TTL 60\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n@ MX 10 mail\nns A 192.0.2.1\n\
            mail A 192.0.2.2\nsub NS ns.sub\nns.sub A 192.0.2.3\nlame NS ns.lame\n\
            x A 192.0.2.4\nx 30 A 192.0.2.5\n";
        let build = |served: bool, group_from: usize| {
            let mut b = ZoneBuilder::new(origin.clone(), Class::IN);
            if !served {
                b = b.only_to_sign();
            }
            b.group_from = group_from;
            let opts = ReadOptions::new(origin.clone());
            read_file_text(text.as_bytes(), Path::new("s"), &opts, &mut |r| b.add(r));
            let (zone, warnings) = b.build().expect("built");
            let warnings: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
            (zone, warnings)
        };
        let has_additional = |zone: &Zone, name: &str, rtype: RType| {
            let node = zone.node(Name::parse(name).unwrap().as_wire()).unwrap();
            node.rrset(rtype).unwrap().additional().is_some()
        };
        for group_from in [usize::MAX, 0] {
            let (served, served_warnings) = build(true, group_from);
            let (to_sign, to_sign_warnings) = build(false, group_from);
            assert_eq!(served_warnings.len(), 2, "{served_warnings:?}");
            assert_eq!(to_sign_warnings, served_warnings);
            assert!(crate::diff::diff(&served, &to_sign).is_empty());
            assert_eq!(to_sign.record_count(), served.record_count());
            for (name, rtype) in [
                ("s.test", RType::NS),
                ("s.test", RType::MX),
                ("sub.s.test", RType::NS),
            ] {
                assert!(has_additional(&served, name, rtype), "{name} {rtype}");
                assert!(!has_additional(&to_sign, name, rtype), "{name} {rtype}");
            }
            assert!(!served.links.as_ref().unwrap().referrers.is_empty());
            assert!(
                to_sign
                    .links
                    .as_ref()
                    .is_none_or(|l| l.referrers.is_empty())
            );
        }
    }

    /// Built both ways, the zone is the same to the byte: each shard's
    /// arena (every node, its RRsets and their additional blocks with
    /// glue and signatures) and the warnings.
    fn same_both_ways(text: &str, origin: &str) {
        // One hasher, so that both ways place owners alike.
        let hasher = DefaultHashBuilder::default();
        let (one, one_warnings) = built(text, origin, usize::MAX, &hasher);
        let (grouped, grouped_warnings) = built(text, origin, 0, &hasher);
        assert_eq!(one.shards.len(), grouped.shards.len());
        for (a, b) in one.shards.iter().zip(grouped.shards.iter()) {
            assert!(a.arena == b.arena, "a shard packs differently");
        }
        assert_eq!((one.records, one.nodes), (grouped.records, grouped.nodes));
        // Who refers to a target, in any order.
        let referrers = |z: &Zone| {
            let links = z.links.as_deref().cloned().unwrap_or_default();
            let mut all: Vec<_> = links.referrers.into_iter().collect();
            all.iter_mut().for_each(|(_, nodes)| nodes.sort());
            all.sort();
            (all, links.children.len())
        };
        assert_eq!(referrers(&one), referrers(&grouped));
        assert_eq!(one_warnings, grouped_warnings);
    }

    /// A zone file's records that differ in a number only are two records
    /// (an MX preference of 65 is 'A', 97 is 'a'); the same record with
    /// its name in another case is one.
    #[test]
    fn records_differing_in_a_number_only_are_both_kept() {
        let text = "$ORIGIN m.test.\n$TTL 300\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n\
                    @ MX 65 ns\n@ MX 97 ns\n@ MX 97 NS\n_sip._tcp SRV 0 0 80 ns\n_sip._tcp SRV 0 0 112 ns\n";
        let (zone, _) = built(text, "m.test.", usize::MAX, &DefaultHashBuilder::default());
        let count = |owner: &str, rtype| {
            let owner = Name::parse(owner).unwrap();
            let node = zone.node(owner.as_wire()).unwrap();
            node.rrset(rtype).unwrap().rdatas().count()
        };
        assert_eq!(count("m.test.", RType::MX), 2);
        assert_eq!(count("_sip._tcp.m.test.", RType::SRV), 2);
    }

    #[test]
    fn grouped_logs_build_the_zone_one_log_builds() {
        let root = env!("CARGO_MANIFEST_DIR");
        for (file, origin) in [
            ("tests/data/signed/proofs.test.nsec.zone", "proofs.test."),
            ("tests/data/signed/proofs.test.nsec3.zone", "proofs.test."),
            (
                "../heron/tests/data/differential/edge.test.zone",
                "edge.test.",
            ),
        ] {
            let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
            same_both_ways(&text, origin);
        }
    }

    /// Large enough to pack on every core, one group per unit: signed
    /// MX targets, delegations with glue below and beside them, a name
    /// server without glue, targets in groups packed before and after
    /// the nodes that name them.
    #[test]
    fn a_large_zone_packs_the_same_from_grouped_logs() {
        let mut text = String::from(
            "$ORIGIN big.test.\n$TTL 300\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\n@ NS ns2.d7\n\
             ns1 A 192.0.2.1\nns1 RRSIG A 13 3 300 20300101000000 20200101000000 1 big.test. AAAA\n",
        );
        for i in 0..20_000 {
            let j = (i * 7919) % 20_000;
            text.push_str(&format!(
                "h{i} A 192.0.2.{}\nh{i} RRSIG A 13 3 300 20300101000000 20200101000000 1 big.test. AAAA\n\
                 h{i} MX 10 h{j}\n",
                i % 250
            ));
            if i % 10 == 7 {
                text.push_str(&format!(
                    "d{i} NS ns.d{i}\nd{i} NS ns2.d{i}\nd{i} NS h{j}\nns.d{i} A 198.51.100.1\n"
                ));
            }
        }
        same_both_ways(&text, "big.test.");
    }

    #[test]
    fn owners_sharing_a_hash_still_get_a_node_each() {
        let origin = Name::parse("collide.test.").unwrap();
        let mut b = ZoneBuilder::new(origin.clone(), Class::IN);
        let text = "@ 3600 SOA ns hostmaster 1 3600 600 86400 300\n\
                    @ NS ns\nns A 192.0.2.1\n\
                    a TXT one\nb A 192.0.2.2\na A 192.0.2.3\nB TXT two\na TXT three\n";
        let opts = ReadOptions::new(origin);
        let errors = read_file_text(text.as_bytes(), Path::new("c.zone"), &opts, &mut |r| {
            b.add(r)
        });
        assert!(errors.is_empty(), "{errors:?}");
        // Give the owners a and b one hash, as a collision would.
        let name = |e: &Entry, b: &ZoneBuilder| b.logged(e).owner.to_ascii_lowercase();
        let a_hash = b
            .entries
            .iter()
            .find(|e| name(e, &b) == b"\x01a\x07collide\x04test\x00")
            .unwrap()
            .hash;
        for i in 0..b.entries.len() {
            if name(&b.entries[i], &b) == b"\x01b\x07collide\x04test\x00" {
                b.entries[i].hash = a_hash;
            }
        }
        let drafts = b.sort_entries(1);
        let owners: Vec<Vec<(Vec<u8>, u16)>> = drafts
            .iter()
            .map(|d| {
                let run = &b.entries[d.start as usize..(d.start + d.len) as usize];
                run.iter().map(|e| (name(e, &b), e.rtype)).collect()
            })
            .collect();
        let a: Vec<_> = owners
            .iter()
            .filter(|o| o[0].0.starts_with(b"\x01a"))
            .collect();
        let bs: Vec<_> = owners
            .iter()
            .filter(|o| o[0].0.starts_with(b"\x01b"))
            .collect();
        let types = |o: &Vec<(Vec<u8>, u16)>| o.iter().map(|(_, t)| *t).collect::<Vec<_>>();
        // One draft per owner, all its records, by type then as read.
        assert_eq!((a.len(), bs.len()), (1, 1));
        assert_eq!(types(a[0]), vec![1, 16, 16]);
        assert_eq!(types(bs[0]), vec![1, 16]);
        assert!(
            a[0].iter()
                .chain(bs[0].iter())
                .all(|(o, _)| o == &a[0][0].0 || o == &bs[0][0].0)
        );
        assert_eq!(
            drafts.iter().map(|d| d.len as usize).sum::<usize>(),
            b.entries.len()
        );
    }

    #[test]
    fn a_log_group_past_its_offsets_refuses_the_zone() {
        let origin = Name::parse("big.test.").unwrap();
        let mut b = ZoneBuilder::new(origin.clone(), Class::IN);
        let file: Arc<Path> = Arc::from(Path::new("z"));
        // The limit as if the log had grown to what an offset holds.
        b.log_limit = 40;
        b.add_wire(origin.as_wire(), (RType::TXT, 60), b"\x01x", (&file, 1));
        b.add_wire(origin.as_wire(), (RType::TXT, 60), b"\x01x", (&file, 1));
        assert_eq!(b.entries.len(), 2, "up to the limit, records are taken");
        for _ in 0..2 {
            b.add_wire(origin.as_wire(), (RType::TXT, 60), b"\x01y", (&file, 2));
        }
        assert_eq!(b.entries.len(), 2, "records past the limit are not taken");
        let refused = |b: ZoneBuilder| {
            let Err(errors) = b.build() else {
                panic!("a zone past the limit was built")
            };
            errors.iter().filter(|p| p.message == TOO_LARGE).count()
        };
        assert_eq!(refused(b), 1);
        // A large file read in pieces: joining two pieces past the limit.
        let mut whole = ZoneBuilder::new(origin.clone(), Class::IN);
        whole.log_limit = 40;
        let mut piece = whole.sibling();
        whole.add_wire(origin.as_wire(), (RType::TXT, 60), b"\x01x", (&file, 1));
        piece.add_wire(origin.as_wire(), (RType::TXT, 60), b"\x01y", (&file, 2));
        piece.add_wire(origin.as_wire(), (RType::TXT, 60), b"\x01z", (&file, 3));
        whole.append(piece);
        assert_eq!(refused(whole), 1);
    }

    #[test]
    fn grouping_by_shard_keeps_every_entry_and_puts_it_home() {
        // Past one block of the bucketed copy too, and past LOG_GROUPS shards.
        for (n, shards) in [
            (1000, 1),
            (1000, 2),
            (1000, 16),
            (1000, 64),
            (100_000, 1024),
        ] {
            // Hashes spread over the shard bits, some shards left empty.
            let entries: Vec<Entry> = (0..n as u64)
                .map(|i| Entry {
                    hash: i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & !(0x10 << 32),
                    at: i as u32,
                    ..Entry::default()
                })
                .collect();
            let (entries, bounds) = group_by_shard(entries, shards);
            assert_eq!(
                (bounds.len(), bounds[0], bounds[shards]),
                (shards + 1, 0, n)
            );
            for (shard, range) in bounds.windows(2).enumerate() {
                let home = entries[range[0]..range[1]].iter();
                assert!(home.clone().all(|e| shard_of(e.hash, shards) == shard));
            }
            let mut seen: Vec<u32> = entries.iter().map(|e| e.at).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n as u32).collect::<Vec<_>>());
        }
    }
}
