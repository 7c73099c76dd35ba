//! Signing a zone straight to master-file text, as an offline signer
//! (`kzonesign`, `dnssec-signzone`, `ldns-signzone`) does: each signing
//! thread writes the lines of the batch it signed (the batch's names with
//! their records, NSEC and RRSIGs), and the batches go out in order. No
//! signed [`Zone`] is built: that build and the text after it were a
//! third of signing the root-like zone, on one thread.
//!
//! The lines are those of the zone [`super::sign_zone`] builds, in another
//! order within a name (the signer's apex records after the zone's), and
//! the NSEC3 chain after every other name.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

use heron_proto::RType;
use heron_zone::Zone;
use heron_zone::zone::{LineWriter, Node};

use super::plan::{Entry, from_signer, plan_of};
use super::{
    Batch, Context, Job, OwnedRRset, SignConfig, SignError, Sink, Work, ZoneKey, check_keys,
    signer_records, signing_threads,
};

/// What [`sign_zone_to_text`] wrote.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SignedText {
    /// Signatures made.
    pub signatures: usize,
    /// Records written, signatures included.
    pub records: usize,
    /// Their octets in wire form, uncompressed (owner, type, class, TTL,
    /// RDATA length, RDATA).
    pub wire_octets: usize,
}

/// Signs `zone` as [`super::sign_zone`] does and writes the signed zone to
/// `out` as master-file lines, one record a line, on every core.
pub fn sign_zone_to_text(
    zone: &Zone,
    keys: &[ZoneKey],
    config: &SignConfig,
    now: u64,
    out: &mut (dyn Write + Send),
) -> Result<SignedText, SignError> {
    let helpers = signing_threads(zone.node_count(), usize::MAX) - 1;
    sign_to_text_with(|| Ok(zone), (keys, config, now), out, helpers)
}

/// [`sign_zone_to_text`] of the zone `load` gives (its error returned as
/// it is), the signing threads started before it loads. Started once the
/// zone was loaded, a thread was often queued behind its parent, on its
/// core, for one to four milliseconds: up to a fifth of signing the
/// root-like zone on two cores. A thread with nothing to sign (a zone
/// too small to share) ends as the signing starts.
pub fn load_and_sign_to_text(
    load: impl FnOnce() -> Result<Zone, SignError>,
    keys: &[ZoneKey],
    config: &SignConfig,
    now: u64,
    out: &mut (dyn Write + Send),
) -> Result<SignedText, SignError> {
    let loaded = OnceLock::new();
    let zone = || load().map(|zone| loaded.get_or_init(|| zone));
    let helpers = signing_threads(usize::MAX, usize::MAX) - 1;
    sign_to_text_with(zone, (keys, config, now), out, helpers)
}

/// What a signing is given besides the zone: keys, policy, the time.
type Given<'g> = (&'g [ZoneKey], &'g SignConfig, u64);

/// [`sign_zone_to_text`] of the zone `zone` gives, with `helpers` threads
/// besides this one. They are started first and wait while this thread
/// gets the zone and plans the signing.
pub(super) fn sign_to_text_with<'z>(
    zone: impl FnOnce() -> Result<&'z Zone, SignError>,
    (keys, config, now): Given<'z>,
    out: &mut (dyn Write + Send),
    helpers: usize,
) -> Result<SignedText, SignError> {
    check_keys(keys)?;
    let prepared = OnceLock::new();
    let ready: OnceLock<Option<Work>> = OnceLock::new();
    let signed = std::thread::scope(|scope| {
        let helpers: Vec<_> = (0..helpers)
            .map(|_| scope.spawn(|| ready.wait().as_ref().map_or(Ok((0, 0)), Work::worker_all)))
            .collect();
        let work = zone().and_then(|zone| {
            let prepared = prepared.get_or_init(|| prepare(zone, keys, config, now));
            let p = prepared.as_ref().map_err(Clone::clone)?;
            let lines = Sink::Text(p.lines(zone, out));
            Ok(Work::new(&p.entries, &p.made, &p.context, lines))
        });
        let (work, failed) = match work {
            Ok(work) => (Some(work), None),
            Err(e) => (None, Some(e)),
        };
        let mine = ready.get_or_init(|| work).as_ref().map(Work::worker_all);
        let theirs = super::joined(helpers);
        match (failed, mine, theirs) {
            (Some(e), _, _) => Err(e),
            (None, Some(Ok(mine)), Ok(theirs)) => Ok((mine.0 + theirs.0, mine.1 + theirs.1)),
            (None, Some(Err(e)), _) | (None, _, Err(e)) => Err(e),
            (None, None, _) => unreachable!("a signing planned has its work"),
        }
    });
    let Some(Some(work)) = ready.into_inner() else {
        return Err(signed.expect_err("no signing without a plan"));
    };
    let (signatures, _) = signed?;
    finish(work, signatures)
}

/// What a signing to text needs before its threads can start.
struct Prepared<'z> {
    /// Every node of the zone in canonical order (sorted once for the plan
    /// and the text; by themselves each sorted).
    nodes: Vec<Node<'z>>,
    entries: Vec<Entry<'z>>,
    made: Vec<OwnedRRset>,
    context: Context<'z>,
}

fn prepare<'z>(
    zone: &'z Zone,
    keys: &'z [ZoneKey],
    config: &SignConfig,
    now: u64,
) -> Result<Prepared<'z>, SignError> {
    let nodes: Vec<Node> = zone.nodes_in_canonical_order().collect();
    let entries = plan_of(zone, nodes.iter().copied());
    let made = signer_records(zone, &entries, keys, config)?;
    let context = Context::new(zone, &made, (keys, None), config, now);
    Ok(Prepared {
        nodes,
        entries,
        made,
        context,
    })
}

impl<'z> Prepared<'z> {
    fn lines<'p>(&'p self, zone: &'z Zone, out: &'p mut (dyn Write + Send)) -> Lines<'p> {
        Lines::new(
            zone,
            &self.nodes,
            &self.entries,
            self.context.soa_replaced,
            out,
        )
    }
}

/// The totals of a signing whose threads have all finished, its text
/// flushed.
fn finish(work: Work, signatures: usize) -> Result<SignedText, SignError> {
    let Sink::Text(lines) = work.sink else {
        unreachable!("made to write text")
    };
    let mut written = (lines.ordered.into_inner()).expect("no signing thread panicked");
    let failed = |e: io::Error| SignError(format!("writing the signed zone: {e}"));
    if let Some(e) = written.error.take() {
        return Err(failed(e));
    }
    written.out.flush().map_err(failed)?;
    Ok(SignedText {
        signatures,
        records: written.records,
        wire_octets: written.wire_octets,
    })
}

/// A signing's text: the zone's nodes, and where the batches' lines are
/// put in order.
pub(super) struct Lines<'a> {
    /// Every node of the zone in canonical order, those the signer leaves
    /// out of its plan (glue, occluded names) included.
    nodes: &'a [Node<'a>],
    /// Where each entry of the plan is in `nodes`.
    node_of_entry: Vec<usize>,
    apex: &'a [u8],
    soa_replaced: bool,
    ordered: Mutex<Ordered<'a>>,
}

/// The batches' text as it is written: each waits for those before it.
struct Ordered<'o> {
    out: &'o mut (dyn Write + Send),
    next: usize,
    waiting: BTreeMap<usize, Vec<u8>>,
    records: usize,
    wire_octets: usize,
    error: Option<io::Error>,
}

impl<'a> Lines<'a> {
    /// `nodes`: every node of `zone` in canonical order.
    pub(super) fn new(
        zone: &'a Zone,
        nodes: &'a [Node<'a>],
        entries: &[Entry<'a>],
        soa_replaced: bool,
        out: &'a mut (dyn Write + Send),
    ) -> Lines<'a> {
        // The plan's names are some of the nodes, in the same order.
        let mut at = 0;
        let node_of_entry = (entries.iter())
            .map(|entry| {
                while nodes[at].key() != entry.node.key() {
                    at += 1;
                }
                at
            })
            .collect();
        Lines {
            nodes,
            node_of_entry,
            apex: zone.origin().as_wire(),
            soa_replaced,
            ordered: Mutex::new(Ordered {
                out,
                next: 0,
                waiting: BTreeMap::new(),
                records: 0,
                wire_octets: 0,
                error: None,
            }),
        }
    }

    /// Writes batch `i`'s lines once those of every batch before it are
    /// written.
    pub(super) fn keep(&self, work: &Work, i: usize, made: (&[OwnedRRset], &[Job]), batch: &Batch) {
        let (nsecs, jobs) = made;
        let mut text = Text::new(jobs, batch);
        if i < work.entry_batches() {
            self.entry_batch(work, i, nsecs, &mut text);
        } else {
            for (k, job) in jobs.iter().enumerate() {
                text.start(job.owner());
                text.job(k);
            }
        }
        let mut guard = self.ordered.lock().expect("no signing thread panicked");
        let ordered = &mut *guard;
        ordered.records += text.records;
        ordered.wire_octets += text.wire_octets;
        ordered.waiting.insert(i, text.bytes);
        while let Some(bytes) = ordered.waiting.remove(&{ ordered.next }) {
            ordered.next += 1;
            if ordered.error.is_none()
                && let Err(e) = ordered.out.write_all(&bytes)
            {
                ordered.error = Some(e);
                work.failed.store(true, Ordering::Relaxed);
            }
        }
    }

    /// The lines of the nodes from entry batch `i`'s first name to the
    /// next batch's: each RRset with its RRSIGs, then (at the apex) the
    /// signer's apex records, then the name's NSEC.
    fn entry_batch(&self, work: &Work, i: usize, nsecs: &[OwnedRRset], text: &mut Text) {
        let (start, end) = work.entry_range(i);
        let first = self.node_of_entry[start];
        let last = match self.node_of_entry.get(end) {
            Some(&next) => next,
            None => self.nodes.len(),
        };
        let jobs = text.jobs;
        let zone_jobs = jobs.iter().take_while(|j| matches!(j, Job::Zone { .. }));
        let zone_jobs = zone_jobs.count();
        let made_end = jobs.len() - nsecs.len();
        let (mut next_job, mut next_nsec) = (0, 0);
        for node in &self.nodes[first..last] {
            let owner = node.owner_wire();
            text.start(owner);
            let apex = node.key() == self.apex;
            for rrset in node.data() {
                let replaced = apex && self.soa_replaced && rrset.rtype == RType::SOA;
                if from_signer(rrset.rtype) || replaced {
                    continue;
                }
                let ttl = rrset.ttl();
                text.records(rrset.rtype, ttl, rrset.rdatas());
                let job = jobs.get(next_job).filter(|_| next_job < zone_jobs);
                if job.is_some_and(|j| j.owner() == owner && j.rtype() == rrset.rtype) {
                    text.signatures(next_job);
                    next_job += 1;
                }
            }
            if apex {
                (zone_jobs..made_end).for_each(|k| text.job(k));
            }
            if nsecs.get(next_nsec).is_some_and(|nsec| nsec.owner == owner) {
                text.job(made_end + next_nsec);
                next_nsec += 1;
            }
        }
        debug_assert_eq!((next_job, next_nsec), (zone_jobs, nsecs.len()));
    }
}

/// One batch's lines as they are written.
struct Text<'j> {
    jobs: &'j [Job<'j>],
    batch: &'j Batch,
    /// Each job's signatures: their places in `batch.sigs`.
    spans: Vec<Range<usize>>,
    lines: LineWriter,
    bytes: Vec<u8>,
    records: usize,
    wire_octets: usize,
    /// The owner's length in wire form, for `wire_octets`.
    owner_len: usize,
}

impl<'j> Text<'j> {
    fn new(jobs: &'j [Job<'j>], batch: &'j Batch) -> Text<'j> {
        let mut spans = vec![0..0; jobs.len()];
        for (m, &(index, _)) in batch.sigs.iter().enumerate() {
            let span = &mut spans[index as usize];
            match span.start == span.end {
                true => *span = m..m + 1,
                false => span.end = m + 1,
            }
        }
        Text {
            jobs,
            batch,
            spans,
            lines: LineWriter::new(),
            bytes: Vec::new(),
            records: 0,
            wire_octets: 0,
            owner_len: 0,
        }
    }

    /// Takes `owner` (wire form) for the lines that follow.
    fn start(&mut self, owner: &[u8]) {
        self.lines.start_owner(owner);
        self.owner_len = owner.len();
    }

    /// Job `k`'s records and their signatures, at the owner started.
    fn job(&mut self, k: usize) {
        let job = &self.jobs[k];
        self.records(job.rtype(), job.ttl(), job.rdatas());
        self.signatures(k);
    }

    fn records<R: AsRef<[u8]>>(&mut self, rtype: RType, ttl: u32, rdatas: impl Iterator<Item = R>) {
        for rdata in rdatas {
            self.line(rtype, ttl, rdata.as_ref());
        }
    }

    /// The RRSIGs made for job `k`.
    fn signatures(&mut self, k: usize) {
        let (jobs, batch) = (self.jobs, self.batch);
        let ttl = jobs[k].ttl();
        for m in self.spans[k].clone() {
            let start = m.checked_sub(1).map_or(0, |before| batch.sigs[before].1);
            self.line(RType::RRSIG, ttl, &batch.rdata[start..batch.sigs[m].1]);
        }
    }

    fn line(&mut self, rtype: RType, ttl: u32, rdata: &[u8]) {
        self.lines.record(&mut self.bytes, rtype, ttl, rdata);
        self.records += 1;
        self.wire_octets += self.owner_len + 10 + rdata.len();
    }
}

impl Work<'_> {
    /// Takes and signs batches until none is left, writing their text.
    fn worker_all(&self) -> Result<(usize, usize), SignError> {
        self.worker(self.batches(), None)
    }
}
