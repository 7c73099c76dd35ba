//! Signing a whole zone: DNSKEY, an NSEC or NSEC3 chain, and an RRSIG over
//! every authoritative RRset, made on every core, and the signed zone
//! built as a [`heron_zone::Zone`] that answers with them.
//!
//! Delegation NS and glue are not signed (RFC 4035 2.2), DS is; names
//! below a delegation are not in the chain. NSEC and NSEC3 TTLs are the
//! lesser of the SOA's TTL and MINIMUM (RFC 9077). Signature expirations
//! are spread evenly over the policy's jitter by each RRset's rank in the
//! zone ([`Validity::expiration_of`]).

mod denial;
mod incremental;
mod plan;
mod reuse;
mod rrsig;
mod text;

pub use denial::{Denial, base32hex, nsec3_hash, nsec3param_rdata};
pub use incremental::sign_change;
pub use plan::{Entry, Kind, SIGNER_TYPES, plan};
pub use reuse::refresh_due;
pub use rrsig::{
    Place, SigHeader, Validity, labels_field, seconds_until, sig_time, write_canonical_rrset,
};
pub use text::{SignedText, load_and_sign_to_text, sign_zone_to_text};

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::thread::ScopedJoinHandle;

use heron_proto::RType;
use heron_zone::zone::RRset;
use heron_zone::{Problem, Severity, Zone, ZoneBuilder};

use crate::dnskey::key_tag;
use crate::keys::{KeyRole, SigningKey};

/// A key as one signing uses it.
pub struct ZoneKey {
    pub key: SigningKey,
    pub role: KeyRole,
    /// DNSKEY RDATA, and its tag.
    pub dnskey: Vec<u8>,
    pub tag: u16,
    /// Signs the DNSKEY, CDS and CDNSKEY RRsets in this signing.
    pub signs_keys: bool,
    /// Signs the zone's other RRsets in this signing.
    pub signs_zone: bool,
    /// In the DNSKEY RRset: a key of a new algorithm signs before it is
    /// published, and one leaving signs after (RFC 6781 4.1.4).
    pub published: bool,
}

impl ZoneKey {
    /// A key that signs what its role signs.
    pub fn new(key: SigningKey, role: KeyRole) -> ZoneKey {
        let (signs_keys, signs_zone) = (role.signs_dnskey(), role.signs_zone());
        ZoneKey::planned(key, role, signs_keys, signs_zone)
    }

    /// A key published in the DNSKEY RRset (with its role's flags) that
    /// signs only what a rollover's step says: during a rollover a key
    /// may be published and sign nothing, or sign only some RRsets.
    pub fn planned(key: SigningKey, role: KeyRole, signs_keys: bool, signs_zone: bool) -> ZoneKey {
        let dnskey = key.dnskey_rdata(role.flags());
        let tag = key_tag(&dnskey);
        ZoneKey {
            key,
            role,
            dnskey,
            tag,
            signs_keys: signs_keys && role.signs_dnskey(),
            signs_zone: signs_zone && role.signs_zone(),
            published: true,
        }
    }

    /// A key that signs the zone's RRsets without being in the DNSKEY RRset.
    pub fn unpublished(key: SigningKey, role: KeyRole) -> ZoneKey {
        ZoneKey {
            signs_keys: false,
            published: false,
            ..ZoneKey::planned(key, role, false, true)
        }
    }
}

/// Types signed by the keys that sign the DNSKEY RRset (RFC 7344 4.1: CDS
/// and CDNSKEY by a key the parent's DS names).
fn signed_by_key_signers(rtype: RType) -> bool {
    matches!(rtype, RType::DNSKEY | RType::CDS | RType::CDNSKEY)
}

/// How to sign, from the zone's policy.
#[derive(Clone, Debug)]
pub struct SignConfig {
    pub denial: Denial,
    pub dnskey_ttl: u32,
    /// Seconds a signature is valid from its inception.
    pub validity: u32,
    /// Seconds over which expirations are spread (less than `validity`).
    pub jitter: u32,
    /// Seconds inceptions are back-dated.
    pub inception_offset: u32,
    /// Seconds before expiration at which a signature of the previous
    /// version is made anew rather than kept.
    pub refresh: u32,
    /// The signed zone's SOA serial, when not the unsigned zone's.
    pub serial: Option<u32>,
}

impl SignConfig {
    /// The times of a signing at `now` (Unix seconds).
    pub fn validity_at(&self, now: u64) -> Validity {
        Validity {
            inception: now.saturating_sub(u64::from(self.inception_offset)),
            expiration: now + u64::from(self.validity),
            jitter: self.jitter,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignError(pub String);

impl fmt::Display for SignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SignError {}

/// An RRset the signer makes (DNSKEY, NSEC3PARAM, NSEC, NSEC3).
#[derive(Clone, Debug)]
pub struct OwnedRRset {
    /// Wire form; its case is kept in the zone, lower-cased to sign.
    pub owner: Vec<u8>,
    pub rtype: RType,
    pub ttl: u32,
    pub rdatas: Vec<Vec<u8>>,
}

/// A signed zone and what it took.
pub struct Signed {
    pub zone: Zone,
    /// Signatures made by this signing...
    pub signatures: usize,
    /// ...and kept from the previous version.
    pub reused: usize,
    pub warnings: Vec<Problem>,
}

/// One RRset to sign: in the zone, or made by the signer.
#[derive(Clone, Copy)]
enum Job<'z> {
    Zone { owner: &'z [u8], rrset: RRset<'z> },
    Made(&'z OwnedRRset),
}

impl<'z> Job<'z> {
    fn owner(&self) -> &'z [u8] {
        match self {
            Job::Zone { owner, .. } => owner,
            Job::Made(set) => &set.owner,
        }
    }

    fn rtype(&self) -> RType {
        match self {
            Job::Zone { rrset, .. } => rrset.rtype,
            Job::Made(set) => set.rtype,
        }
    }

    fn ttl(&self) -> u32 {
        match self {
            Job::Zone { rrset, .. } => rrset.ttl(),
            Job::Made(set) => set.ttl,
        }
    }

    fn rdatas(&self) -> Box<dyn Iterator<Item = Cow<'z, [u8]>> + 'z> {
        match *self {
            Job::Zone { rrset, .. } => Box::new(rrset.rdatas()),
            Job::Made(set) => Box::new(set.rdatas.iter().map(|r| Cow::Borrowed(&r[..]))),
        }
    }
}

/// Signs `zone` (its own DNSKEY, RRSIG, NSEC, NSEC3 and NSEC3PARAM
/// records are replaced) with `keys` at `now` (Unix seconds).
pub fn sign_zone(
    zone: &Zone,
    keys: &[ZoneKey],
    config: &SignConfig,
    now: u64,
) -> Result<Signed, SignError> {
    sign_zone_after(zone, None, keys, config, now)
}

/// [`sign_zone`] of a new version of a zone whose previous version,
/// signed, is `previous`: the RRSIGs of RRsets that did not change are
/// kept unless due for refresh, so a change of N RRsets makes about 3N
/// new signatures (the RRsets, and the NSEC or NSEC3 records before and
/// at each name added or removed), plus the SOA's.
///
/// The signed zone's records go into its builder as they are made: the
/// unsigned zone's first, then each batch of names with its NSEC records
/// and signatures, so that what is held besides the builder is one batch
/// per thread (not every signature and every NSEC record at once).
/// A zone given by value is dropped once its records are in the builder,
/// before the signed zone is packed.
pub fn sign_zone_after<Z: Borrow<Zone>>(
    zone: Z,
    previous: Option<&Zone>,
    keys: &[ZoneKey],
    config: &SignConfig,
    now: u64,
) -> Result<Signed, SignError> {
    check_keys(keys)?;
    let builder = sign_into_builder(zone.borrow(), previous, keys, config, now)?;
    // Everything is in the builder: the unsigned zone goes first.
    drop(zone);
    build(builder.0, builder.1, builder.2)
}

/// [`sign_zone_after`] up to the builder holding every record of the
/// signed zone: (builder, signatures made, kept).
fn sign_into_builder(
    zone: &Zone,
    previous: Option<&Zone>,
    keys: &[ZoneKey],
    config: &SignConfig,
    now: u64,
) -> Result<(ZoneBuilder, usize, usize), SignError> {
    sign_into_builder_by(zone, (previous, keys), config, now, &|work, fill| {
        work.sign_all(fill)
    })
}

/// How a signing's batches are run: [`Work::sign_all`], or a set number
/// of threads in tests.
type RunBatches<'r> = &'r dyn Fn(&Work, Fill) -> Result<(usize, usize), SignError>;

/// Puts the unsigned zone's records in the builder (once).
type Fill<'f> = &'f mut dyn FnMut(&mut ZoneBuilder);

/// [`sign_into_builder`] with its batches run by `run`.
fn sign_into_builder_by(
    zone: &Zone,
    (previous, keys): (Option<&Zone>, &[ZoneKey]),
    config: &SignConfig,
    now: u64,
    run: RunBatches,
) -> Result<(ZoneBuilder, usize, usize), SignError> {
    let entries = plan(zone);
    let made = signer_records(zone, &entries, keys, config)?;
    let context = Context::new(zone, &made, (keys, previous), config, now);
    // The unsigned zone's warnings were said when it was loaded.
    let builder = ZoneBuilder::new(zone.origin().clone(), zone.class()).without_warnings();
    let work = Work::new(
        &entries,
        &made,
        &context,
        Sink::Builder(Mutex::new(builder)),
    );
    let (signatures, reused) = run(&work, &mut |builder| {
        add_unsigned(builder, zone, &made, context.soa_replaced);
        // After the unsigned records, for their room and the signatures'
        // again (the part not used is never touched). Measured at 200,000
        // records, the server's peak (jemalloc): reserved before them
        // 2.56x the signed wire size, after them for the signatures alone
        // 2.54x, this 2.33x; sign_zone's (glibc) 1.94x, 1.97x here.
        reserve_signed(builder, &entries, &made, &context);
    })?;
    let Sink::Builder(builder) = work.sink else {
        unreachable!("made with a builder")
    };
    let builder = builder.into_inner().expect("no signing thread panicked");
    Ok((builder, signatures, reused))
}

/// `zone` served unsigned: its DNSKEY, RRSIG, NSEC, NSEC3 and NSEC3PARAM
/// records dropped (CDS and CDNSKEY are the caller's), its SOA serial
/// `serial` if given. What a zone that went insecure serves once every
/// key has left it.
pub fn unsigned_zone(zone: &Zone, serial: Option<u32>) -> Result<Signed, SignError> {
    let made: Vec<OwnedRRset> = serial
        .map(|s| soa_with_serial(zone, s))
        .into_iter()
        .collect();
    let mut builder = ZoneBuilder::new(zone.origin().clone(), zone.class());
    add_unsigned(&mut builder, zone, &made, serial.is_some());
    build(builder, 0, 0)
}

/// The zone's SOA RRset with another serial.
fn soa_with_serial(zone: &Zone, serial: u32) -> OwnedRRset {
    let soa = zone.soa();
    let mut rdata = soa.first_rdata().into_owned();
    // The serial follows the two names.
    let mut at = 0;
    for _ in 0..2 {
        while rdata[at] != 0 {
            at += 1 + rdata[at] as usize;
        }
        at += 1;
    }
    rdata[at..at + 4].copy_from_slice(&serial.to_be_bytes());
    OwnedRRset {
        owner: zone.apex().owner_wire().to_vec(),
        rtype: RType::SOA,
        ttl: soa.ttl(),
        rdatas: vec![rdata],
    }
}

fn check_keys(keys: &[ZoneKey]) -> Result<(), SignError> {
    if !keys.iter().any(|k| k.signs_keys) {
        return Err(SignError("no KSK or CSK to sign the DNSKEY RRset".into()));
    }
    if !keys.iter().any(|k| k.signs_zone) {
        return Err(SignError("no ZSK or CSK to sign the zone".into()));
    }
    Ok(())
}

/// The records the signer makes: those at the apex first (DNSKEY,
/// NSEC3PARAM, and the SOA when `config.serial` replaces it), then the
/// NSEC3 chain.
fn signer_records(
    zone: &Zone,
    entries: &[Entry],
    keys: &[ZoneKey],
    config: &SignConfig,
) -> Result<Vec<OwnedRRset>, SignError> {
    let apex = zone.apex().owner_wire().to_vec();
    let denial_ttl = zone.negative_ttl();
    let mut made = vec![OwnedRRset {
        owner: apex.clone(),
        rtype: RType::DNSKEY,
        ttl: config.dnskey_ttl,
        rdatas: (keys.iter())
            .filter(|k| k.published)
            .map(|k| k.dnskey.clone())
            .collect(),
    }];
    match &config.denial {
        // Each name's NSEC is made as its batch is signed.
        Denial::Nsec => made.extend(config.serial.map(|serial| soa_with_serial(zone, serial))),
        Denial::Nsec3 {
            iterations,
            salt,
            opt_out,
        } => {
            made.push(OwnedRRset {
                owner: apex,
                rtype: RType::NSEC3PARAM,
                ttl: 0,
                rdatas: vec![nsec3param_rdata(salt, *iterations)],
            });
            made.extend(config.serial.map(|serial| soa_with_serial(zone, serial)));
            let params = (*iterations, &salt[..], *opt_out);
            let origin = zone.origin().as_wire();
            made.extend(denial::nsec3_chain(entries, origin, denial_ttl, params)?);
        }
    }
    Ok(made)
}

/// How many of `made` (see [`signer_records`]) are at the apex: signed
/// with the apex's batch.
fn apex_sets(made: &[OwnedRRset]) -> usize {
    made.iter().take_while(|m| m.rtype != RType::NSEC3).count()
}

/// What every signature of one signing shares.
struct Context<'a> {
    keys: &'a [ZoneKey],
    /// The apex, lower-cased.
    signer: &'a [u8],
    class: u16,
    validity: Validity,
    previous: Option<reuse::Previous<'a>>,
    /// The signer makes the SOA (a new serial): the zone's is not signed.
    soa_replaced: bool,
    /// NSEC denial: each name's NSEC is made with its batch, of this TTL.
    nsec_ttl: Option<u32>,
}

impl<'a> Context<'a> {
    fn new(
        zone: &'a Zone,
        made: &[OwnedRRset],
        (keys, previous): (&'a [ZoneKey], Option<&'a Zone>),
        config: &SignConfig,
        now: u64,
    ) -> Context<'a> {
        Context {
            keys,
            signer: zone.origin().as_wire(),
            class: zone.class().0,
            validity: config.validity_at(now),
            previous: previous.map(|zone| reuse::Previous {
                zone,
                now,
                refresh: config.refresh,
            }),
            soa_replaced: made.iter().any(|m| m.rtype == RType::SOA),
            nsec_ttl: (config.denial == Denial::Nsec).then(|| zone.negative_ttl()),
        }
    }
}

/// The unsigned zone's records less those the signer replaces, and the
/// signer's records made before signing (DNSKEY, NSEC3PARAM, NSEC3, SOA).
fn add_unsigned(builder: &mut ZoneBuilder, zone: &Zone, made: &[OwnedRRset], soa_made: bool) {
    let from = signed_source();
    for node in zone.nodes() {
        let owner = node.owner_wire();
        let apex = node.key() == zone.origin().as_wire();
        let replaced =
            |s: &RRset| plan::from_signer(s.rtype) || (apex && soa_made && s.rtype == RType::SOA);
        for rrset in node.data().filter(|s| !replaced(s)) {
            let ttl = rrset.ttl();
            for rdata in rrset.rdatas() {
                builder.add_wire(owner, (rrset.rtype, ttl), &rdata, (&from, 0));
            }
        }
    }
    for set in made {
        add_made(builder, set, &from);
    }
}

fn add_made(builder: &mut ZoneBuilder, set: &OwnedRRset, from: &Arc<Path>) {
    for rdata in &set.rdatas {
        builder.add_wire(&set.owner, (set.rtype, set.ttl), rdata, (from, 0));
    }
}

fn signed_source() -> Arc<Path> {
    Arc::from(Path::new("(signed)"))
}

/// Room in the builder for the zone's records and what signing adds, so
/// that its log is not copied as it grows (a copy is the log twice, for a
/// moment).
fn reserve_signed(builder: &mut ZoneBuilder, entries: &[Entry], made: &[OwnedRRset], c: &Context) {
    // A record in the log: owner, type, kind, TTL, RDATA length, RDATA.
    let record = |owner: usize, rdata: usize| 1 + owner + 9 + rdata;
    // The unsigned records' room again, as the log holds them: counted
    // from the zone, record by record, it took 0.4 ms of signing the
    // root-like zone.
    let (mut records, mut bytes) = builder.size();
    let sig_rdata: usize = (c.keys.iter())
        .filter(|k| k.signs_zone)
        .map(|k| 18 + c.signer.len() + k.key.signature_len())
        .sum();
    let signers = c.keys.iter().filter(|k| k.signs_zone).count();
    for entry in entries {
        let owner = entry.node.owner_wire().len();
        let mut sets = entry.signed_rrsets().count();
        if c.nsec_ttl.is_some() && entry.kind != Kind::EmptyNonTerminal {
            // The next name and a bitmap of a few types.
            records += 1;
            bytes += record(owner, owner + 10);
            sets += 1;
        }
        records += sets * signers;
        bytes += sets * (signers * record(owner, 0) + sig_rdata);
    }
    for set in made {
        records += signers;
        bytes += signers * record(set.owner.len(), 0) + sig_rdata;
    }
    builder.reserve(records, bytes);
}

/// Names signed by one batch (a thread takes one at a time): small enough
/// to balance the threads' loads, large enough that taking one and
/// adding its records to the builder costs nothing beside the signing.
const ENTRIES_PER_BATCH: usize = 256;

/// Batches per signing thread that a small zone is cut into at least, so
/// that the last batch leaves the other threads little to wait for: the
/// root-like zone (3,000 names) made 12 batches of about 40 signatures,
/// 0.7 ms each, at 256 names a batch.
const BATCHES_PER_THREAD: usize = 16;

/// Most bytes of records a signing thread holds while the builder is
/// being filled; past this it waits. Holding without a bound raised the
/// peak RSS of signing 200,000 records by 3.5 MB (2.8%), for a fill of
/// 0.13 s; the root-like zone's whole fill (0.9 ms) holds about 6 KB.
const HELD_BYTES: usize = 256 * 1024;

/// Fewest names a batch signs (the cost of taking one stays small).
const MIN_ENTRIES_PER_BATCH: usize = 16;

/// Fewest names that make a signing thread worth starting: a thread took
/// 0.2-0.4 ms to start and finish here, the signatures of 64 names about 1.
const MIN_ENTRIES_PER_THREAD: usize = 64;

/// Threads that sign `names` names in `batches` batches.
fn signing_threads(names: usize, batches: usize) -> usize {
    (heron_zone::cores())
        .min(batches)
        .min(names.div_ceil(MIN_ENTRIES_PER_THREAD))
        .max(1)
}

/// Names per batch for a zone of `entries` names.
fn entries_per_batch(entries: usize) -> usize {
    let batches = heron_zone::cores() * BATCHES_PER_THREAD;
    entries
        .div_ceil(batches)
        .clamp(MIN_ENTRIES_PER_BATCH, ENTRIES_PER_BATCH)
}

/// One signing's work, shared by its threads.
struct Work<'a> {
    /// Names a batch signs.
    per_batch: usize,
    /// The rank of each batch's first RRset among every RRset signed,
    /// and their number last (see [`batch_ranks`]).
    ranks: Vec<u64>,
    entries: &'a [Entry<'a>],
    /// The first `apex_sets` are signed with the apex's batch, the rest
    /// (the NSEC3 chain) in batches after the entries'.
    made: &'a [OwnedRRset],
    apex_sets: usize,
    context: &'a Context<'a>,
    /// Where what each batch makes goes.
    sink: Sink<'a>,
    next: AtomicUsize,
    failed: AtomicBool,
}

/// Where a signing's records go.
enum Sink<'a> {
    /// The builder of the signed zone, for serving.
    Builder(Mutex<ZoneBuilder>),
    /// Master-file text, batch by batch in order ([`text`]).
    Text(text::Lines<'a>),
}

/// One batch's signatures, held until they go into the builder.
#[derive(Default)]
struct Batch {
    /// RRSIG RDATAs one after another...
    rdata: Vec<u8>,
    /// ...each with its job and where it ends in `rdata`.
    sigs: Vec<(u32, usize)>,
    new: usize,
    reused: usize,
}

impl<'a> Work<'a> {
    fn new(
        entries: &'a [Entry<'a>],
        made: &'a [OwnedRRset],
        context: &'a Context<'a>,
        sink: Sink<'a>,
    ) -> Work<'a> {
        let per_batch = entries_per_batch(entries.len());
        let apex_sets = apex_sets(made);
        Work {
            per_batch,
            ranks: batch_ranks(entries, (made, apex_sets), per_batch, context),
            entries,
            made,
            apex_sets,
            context,
            sink,
            next: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
        }
    }

    /// The builder a [`Sink::Builder`] signing fills.
    fn builder(&self) -> &Mutex<ZoneBuilder> {
        match &self.sink {
            Sink::Builder(builder) => builder,
            Sink::Text(_) => unreachable!("a signing to text has no builder"),
        }
    }

    /// Signs every batch on every core: (signatures made, kept). `fill`
    /// puts the unsigned records in the builder first, on this thread
    /// while the signing threads start and sign, keeping what they make
    /// until the builder is free. On the root-like zone that filling was
    /// 0.9 ms, and a signing thread's start 0.2-0.3.
    fn sign_all(&self, fill: Fill) -> Result<(usize, usize), SignError> {
        let threads = signing_threads(self.entries.len() + self.made.len(), self.batches());
        self.sign_on(threads, fill)
    }

    fn batches(&self) -> usize {
        self.entry_batches() + (self.made.len() - self.apex_sets).div_ceil(self.per_batch)
    }

    fn entry_batches(&self) -> usize {
        self.entries.len().div_ceil(self.per_batch)
    }

    /// [`Work::sign_all`] on `threads` threads. One signs on this thread;
    /// more are started and this one waits for them once it has filled
    /// the builder. (This thread signing as well delayed the others by up
    /// to 4 ms here: a thread started beside a busy one waited for a
    /// scheduler tick to get the idle core.)
    fn sign_on(&self, threads: usize, fill: Fill) -> Result<(usize, usize), SignError> {
        let batches = self.batches();
        let mut builder = self.builder().lock().expect("no signing thread panicked");
        if threads == 1 {
            // A small zone (most zones) is signed on the calling thread:
            // starting one cost more than signing a zone of three names.
            fill(&mut builder);
            drop(builder);
            return self.worker(batches, None);
        }
        let held: Vec<ZoneBuilder> = (0..threads).map(|_| builder.sibling()).collect();
        std::thread::scope(|scope| {
            let workers: Vec<_> = (held.into_iter())
                .map(|held| scope.spawn(|| self.worker(batches, Some(held))))
                .collect();
            fill(&mut builder);
            drop(builder);
            joined(workers)
        })
    }

    /// Takes and signs batches until none is left: (signatures made,
    /// kept). With `held` (a sibling of the builder), a batch that finds
    /// the builder taken waits there, and goes in at the end.
    fn worker(
        &self,
        batches: usize,
        mut held: Option<ZoneBuilder>,
    ) -> Result<(usize, usize), SignError> {
        let mut totals = (0, 0);
        let mut scratch = Scratch::default();
        let mut batch = Batch::default();
        let mut nsecs = Vec::new();
        while !self.failed.load(Ordering::Relaxed) {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= batches {
                break;
            }
            batch.rdata.clear();
            batch.sigs.clear();
            (batch.new, batch.reused) = (0, 0);
            nsecs.clear();
            let done = self.sign_batch(i, &mut nsecs, &mut scratch, &mut batch, held.as_mut());
            if let Err(e) = done {
                self.failed.store(true, Ordering::Relaxed);
                return Err(e);
            }
            totals = (totals.0 + batch.new, totals.1 + batch.reused);
        }
        if let Some(held) = held.filter(|h| !h.is_empty()) {
            let mut builder = self.builder().lock().expect("no signing thread panicked");
            builder.append(held);
        }
        Ok(totals)
    }

    /// Adds a batch's NSEC records and signatures to the builder, or to
    /// `held` while another thread has the builder; or writes the batch's
    /// text.
    fn keep(&self, i: usize, made: (&[OwnedRRset], &[Job]), batch: &Batch, held: Held) {
        let (nsecs, jobs) = made;
        if let Sink::Text(lines) = &self.sink {
            return lines.keep(self, i, made, batch);
        }
        let mut builder = match (self.builder().try_lock(), held) {
            (Ok(mut builder), Some(held)) if !held.is_empty() => {
                // What waited goes in at once: held apart, it kept memory
                // the builder's reserved room already had for it.
                let sibling = builder.sibling();
                builder.append(std::mem::replace(held, sibling));
                builder
            }
            (Ok(builder), _) => builder,
            (Err(TryLockError::WouldBlock), Some(held)) if held.size().1 < HELD_BYTES => {
                return add_batch(held, nsecs, jobs, batch);
            }
            (Err(TryLockError::WouldBlock), _) => {
                self.builder().lock().expect("no signing thread panicked")
            }
            (Err(TryLockError::Poisoned(_)), _) => panic!("a signing thread panicked"),
        };
        add_batch(&mut builder, nsecs, jobs, batch);
    }

    /// Signs batch `i` (names of the plan, or the signer's records after
    /// them) and adds what it made to the builder.
    fn sign_batch(
        &self,
        i: usize,
        nsecs: &mut Vec<OwnedRRset>,
        scratch: &mut Scratch,
        batch: &mut Batch,
        held: Held,
    ) -> Result<(), SignError> {
        let mut jobs: Vec<Job> = Vec::with_capacity(2 * self.per_batch);
        if i < self.entry_batches() {
            let (start, end) = self.entry_range(i);
            let soa_replaced = self.context.soa_replaced;
            for entry in &self.entries[start..end] {
                let owner = entry.node.owner_wire();
                let replaced = |s: &RRset| soa_replaced && s.rtype == RType::SOA;
                let sets = entry.signed_rrsets().filter(|s| !replaced(s));
                jobs.extend(sets.map(|rrset| Job::Zone { owner, rrset }));
            }
            if i == 0 {
                jobs.extend(self.made[..self.apex_sets].iter().map(Job::Made));
            }
            if let Some(ttl) = self.context.nsec_ttl {
                nsecs.extend((start..end).filter_map(|at| denial::nsec_at(self.entries, at, ttl)));
            }
        } else {
            let start = self.apex_sets + (i - self.entry_batches()) * self.per_batch;
            let end = (start + self.per_batch).min(self.made.len());
            jobs.extend(self.made[start..end].iter().map(Job::Made));
        }
        jobs.extend(nsecs.iter().map(Job::Made));
        let (first, of) = (self.ranks[i], self.ranks[self.ranks.len() - 1]);
        for (index, job) in jobs.iter().enumerate() {
            let place = Place::Rank {
                at: first + index as u64,
                of,
            };
            sign_job(job, (index as u32, place), self.context, scratch, batch)?;
        }
        self.keep(i, (nsecs, &jobs), batch, held);
        Ok(())
    }

    /// The entries of entry batch `i`: (first, past the last).
    fn entry_range(&self, i: usize) -> (usize, usize) {
        let start = i * self.per_batch;
        (start, (start + self.per_batch).min(self.entries.len()))
    }
}

/// A signing thread's sibling builder, where its batches wait while
/// another thread has the builder.
type Held<'h> = Option<&'h mut ZoneBuilder>;

/// The signing threads' totals once each has finished: (signatures made,
/// kept), or the first error.
fn joined(workers: Vec<ScopedJoinHandle<Totals>>) -> Totals {
    let mut totals = (0, 0);
    let mut first_error = None;
    for worker in workers {
        match worker.join().expect("a signing thread panicked") {
            Ok((new, reused)) => totals = (totals.0 + new, totals.1 + reused),
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    first_error.map_or(Ok(totals), Err)
}

/// A signing thread's result: (signatures made, kept).
type Totals = Result<(usize, usize), SignError>;

/// Where each batch of `entries` (then of `made`) starts among the RRsets
/// a signing signs, in the order the batches make them (each name's
/// RRsets, then the batch's NSEC records), with their number as the last
/// element: the ranks that spread expirations over the jitter window.
fn batch_ranks(
    entries: &[Entry],
    (made, apex_sets): (&[OwnedRRset], usize),
    per_batch: usize,
    context: &Context,
) -> Vec<u64> {
    let signed = |entry: &Entry| {
        let replaced = |s: &RRset| context.soa_replaced && s.rtype == RType::SOA;
        let nsec = context.nsec_ttl.is_some() && entry.kind != Kind::EmptyNonTerminal;
        entry.signed_rrsets().filter(|s| !replaced(s)).count() as u64 + u64::from(nsec)
    };
    // The apex's batch signs the apex's made sets too.
    let with_apex = |(i, count): (usize, u64)| count + if i == 0 { apex_sets as u64 } else { 0 };
    let counts = (entries.chunks(per_batch))
        .map(|batch| batch.iter().map(signed).sum::<u64>())
        .enumerate()
        .map(with_apex)
        .chain((made[apex_sets..].chunks(per_batch)).map(|batch| batch.len() as u64));
    let mut ranks = vec![0];
    for count in counts {
        ranks.push(ranks[ranks.len() - 1] + count);
    }
    ranks
}

/// Adds a signed batch to `builder`: its NSEC records and its signatures.
fn add_batch(builder: &mut ZoneBuilder, nsecs: &[OwnedRRset], jobs: &[Job], batch: &Batch) {
    let from = signed_source();
    for set in nsecs {
        add_made(builder, set, &from);
    }
    let mut at = 0;
    for &(index, end) in &batch.sigs {
        let job = &jobs[index as usize];
        let rdata = &batch.rdata[at..end];
        builder.add_wire(job.owner(), (RType::RRSIG, job.ttl()), rdata, (&from, 0));
        at = end;
    }
}

/// Buffers one thread reuses from RRset to RRset.
#[derive(Default)]
struct Scratch {
    owner: Vec<u8>,
    rrset: Vec<u8>,
    message: Vec<u8>,
}

/// The RRSIGs of one RRset, one per key of the role that signs it.
fn sign_job(
    job: &Job,
    (index, place): (u32, Place),
    context: &Context,
    scratch: &mut Scratch,
    out: &mut Batch,
) -> Result<(), SignError> {
    let rtype = job.rtype();
    scratch.owner.clear();
    scratch.owner.extend_from_slice(job.owner());
    scratch.owner.make_ascii_lowercase();
    let owner = &scratch.owner[..];
    let ttl = job.ttl();
    let expiration = context.validity.expiration_of(owner, rtype, place);
    scratch.rrset.clear();
    write_canonical_rrset(
        &mut scratch.rrset,
        owner,
        (rtype, context.class, ttl),
        job.rdatas(),
    );
    let old = (context.previous)
        .map(|p| p.signatures(owner, (rtype, context.class), &scratch.rrset))
        .unwrap_or_default();
    for key in context.keys {
        let signs = if signed_by_key_signers(rtype) {
            key.signs_keys
        } else {
            key.signs_zone
        };
        if !signs {
            continue;
        }
        let algorithm = key.key.algorithm().number();
        if let Some(kept) = old.iter().find(|s| reuse::made_by(s, algorithm, key.tag)) {
            out.rdata.extend_from_slice(kept);
            out.sigs.push((index, out.rdata.len()));
            out.reused += 1;
            continue;
        }
        let header = SigHeader {
            covered: rtype,
            algorithm,
            labels: labels_field(owner),
            original_ttl: ttl,
            expiration: sig_time(expiration),
            inception: sig_time(context.validity.inception),
            key_tag: key.tag,
            signer: context.signer,
        };
        scratch.message.clear();
        header.write(&mut scratch.message);
        let header_len = scratch.message.len();
        scratch.message.extend_from_slice(&scratch.rrset);
        let signature = key.key.sign(&scratch.message).map_err(|e| SignError(e.0))?;
        out.rdata.extend_from_slice(&scratch.message[..header_len]);
        out.rdata.extend_from_slice(&signature);
        out.sigs.push((index, out.rdata.len()));
        out.new += 1;
    }
    Ok(())
}

/// The RRSIGs of `jobs` on this thread (a change's few RRsets, not a
/// zone's): each as its job's index and its RDATA, in job order.
fn sign_jobs(jobs: &[Job], context: &Context) -> Result<Vec<(u32, Vec<u8>)>, SignError> {
    let (mut scratch, mut batch) = (Scratch::default(), Batch::default());
    for (index, job) in jobs.iter().enumerate() {
        sign_job(
            job,
            (index as u32, Place::Hash),
            context,
            &mut scratch,
            &mut batch,
        )?;
    }
    let mut at = 0;
    let sigs = batch.sigs.iter().map(|&(index, end)| {
        let rdata = batch.rdata[at..end].to_vec();
        at = end;
        (index, rdata)
    });
    Ok(sigs.collect())
}

/// The signed zone, built from everything signing put in `builder`.
fn build(builder: ZoneBuilder, signatures: usize, reused: usize) -> Result<Signed, SignError> {
    match builder.build() {
        Ok((zone, warnings)) => Ok(Signed {
            zone,
            signatures,
            reused,
            warnings,
        }),
        Err(problems) => Err(SignError(
            problems
                .iter()
                .filter(|p| p.severity == Severity::Error)
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("; "),
        )),
    }
}

#[cfg(test)]
mod tests;
