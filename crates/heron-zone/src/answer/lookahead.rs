//! Answering a batch of queries with their memory waits overlapped.
//!
//! With many zones, or a zone too large for the caches, one answer waits
//! on memory at every step from the catalog down to the node: the
//! catalog's slot, the zone it points to, the zone's origin and shard,
//! the shard's table slot, the node. Taken one query at a time those
//! waits add up; a server that has a batch in hand (the UDP path's
//! `recvmmsg`) can take each step for every query of the batch, starting
//! the loads the next step needs, before taking the next step:
//!
//! 1. parse each query; load the catalog slot of the first origin its
//!    name could be in;
//! 2. load the zone that slot points to;
//! 3. load the zone's origin and the shard the first lookup of the
//!    answer reads (the name one label below the apex);
//! 4. find the zone for certain (the catalog's own lookup, from cache);
//!    load the shard's table slot for the first lookup;
//! 5. load the node the slot points to (its first lines: a referral's NS
//!    RRset and glue, or most nodes whole);
//!
//! and then [`PreparedBatch::answer`] answers each as [`answer`] would,
//! from memory already in the cache. The loads are hints: a guess that
//! misses (a name that is not there, a zone that is not the one) costs a
//! wasted load, never a wrong answer, since step 4 and the answer look
//! everything up again. The one thing the answer takes from here is the
//! hash of its first lookup, computed for the zone that answers.
//!
//! The catalog steps (2 to 4) are taken only when the catalog has many
//! zones ([`Catalog::has_many_zones`]); with few, the zone is found at
//! once in step 1 from a cache-resident catalog. The zone steps are
//! taken for every zone, small ones too: in a server the kernel's UDP
//! path runs between two batches and pushes even a small zone out of the
//! core's caches. Measured on the suite's root-like workload under its
//! CPU cap (`perf record` of the server), the table lookup's share of
//! the server's CPU fell from about 3% to under 1%, for about 150 more
//! instructions a query (callgrind); the 40% mix, whose zone was loaded
//! ahead already, runs 80 fewer, since its first lookup is not hashed
//! twice.
//!
//! [`answer`]: crate::answer::answer

use heron_proto::message::Query;
use heron_proto::name::LabelStarts;

use super::{
    AnswerConfig, Answered, Prepared, PreparedKind, Summary, Transport, answer_prepared,
    for_question, parse,
};
use crate::catalog::{Candidate, Catalog, Served};
use crate::zone::Zone;

/// The most queries [`BatchAnswerer::prepare`] takes at once.
pub const MAX_BATCH: usize = 32;

/// The progress of a batch's queries, on the caller's stack. Only the
/// slots a batch uses are written: a full array would be initialised
/// whole for every batch, which costs as much as a small batch's
/// parsing when batches are one or two queries (a one-socket client at
/// a low rate).
pub type Slots<'c> = arrayvec::ArrayVec<Slot<'c>, MAX_BATCH>;

/// One worker's parsed queries, kept from batch to batch so that nothing
/// is allocated per batch.
pub struct BatchAnswerer {
    queries: Vec<Query>,
}

/// One query of a batch on its way through the steps.
#[derive(Clone, Copy, Debug, Default)]
pub struct Slot<'c> {
    prepared: Prepared<'c>,
    /// A query the engine answers: its zone is still to be found.
    needs_zone: bool,
    /// The first origin the catalog tries for its name, hashed, and the
    /// zone that origin's slot most likely holds. (The hash of the first
    /// name the answer looks up in the zone is in `prepared`.)
    first_origin: Option<Candidate>,
    likely_zone: Option<&'c Zone>,
}

/// A batch whose queries are parsed and whose memory is on its way.
pub struct PreparedBatch<'c, 'b> {
    queries: &'b [Query],
    slots: &'b [Slot<'c>],
}

impl Default for BatchAnswerer {
    fn default() -> Self {
        BatchAnswerer {
            queries: (0..MAX_BATCH).map(|_| Query::new()).collect(),
        }
    }
}

impl BatchAnswerer {
    /// Steps 1 to 5 for a batch of at most [`MAX_BATCH`] raw queries.
    /// `slots` holds each query's progress; the caller keeps it on its
    /// stack, so nothing per batch is copied or allocated.
    #[inline]
    pub fn prepare<'c, 'b, 'q>(
        &'b mut self,
        catalog: &'c Catalog,
        queries: impl IntoIterator<Item = &'q [u8]>,
        slots: &'b mut Slots<'c>,
    ) -> PreparedBatch<'c, 'b> {
        slots.clear();
        for raw in queries {
            let n = slots.len();
            assert!(n < MAX_BATCH, "a batch of more than {MAX_BATCH} queries");
            let mut slot = Slot::default();
            slot.parse(catalog, raw, &mut self.queries[n]);
            slots.push(slot);
        }
        let (queries, slots) = (&self.queries[..slots.len()], &mut slots[..]);
        if catalog.has_many_zones() {
            slots.iter_mut().for_each(|s| s.load_zone(catalog));
            for (s, q) in slots.iter_mut().zip(queries) {
                s.load_shard(q);
            }
            for (s, q) in slots.iter_mut().zip(queries) {
                s.find_zone(catalog, q);
            }
        }
        slots.iter().for_each(Slot::load_slot);
        slots.iter().for_each(Slot::load_node);
        PreparedBatch { queries, slots }
    }
}

impl PreparedBatch<'_, '_> {
    /// Answers the `i`th query of the batch (`raw`, as given to
    /// [`BatchAnswerer::prepare`]) into `out`, unless it is dropped or
    /// deferred, and summarizes the response for rate limiting.
    pub fn answer(
        &self,
        i: usize,
        config: &AnswerConfig,
        raw: &[u8],
        transport: Transport,
        out: &mut Vec<u8>,
    ) -> (Answered, Summary) {
        let prepared = &self.slots[i].prepared;
        answer_prepared(config, prepared, &self.queries[i], raw, transport, out)
    }

    /// The `i`th query as parsed: the query processor takes a deferred
    /// one from here rather than parse it again.
    pub fn query(&self, i: usize) -> &Query {
        &self.queries[i]
    }

    /// The `i`th query if it parsed (a query for the engine or a
    /// deferred one); None for one answered FORMERR or dropped, whose
    /// parsed fields are not to be trusted.
    pub fn parsed(&self, i: usize) -> Option<&Query> {
        let parsed = matches!(
            self.slots[i].prepared.kind,
            PreparedKind::Query(_) | PreparedKind::Deferred
        );
        parsed.then(|| &self.queries[i])
    }

    /// Whether the `i`th query parsed and is the engine's to answer (not
    /// dropped, malformed or deferred): [`PreparedBatch::query`] then
    /// holds it whole.
    pub fn is_plain_query(&self, i: usize) -> bool {
        matches!(self.slots[i].prepared.kind, PreparedKind::Query(_))
    }

    pub fn len(&self) -> usize {
        self.queries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }
}

impl<'c> Slot<'c> {
    /// Step 1: parses `raw` into `q`. For a query the engine answers,
    /// starts loading the catalog slot of its first candidate origin, or
    /// with few zones finds the zone now and starts loading its first
    /// lookup.
    fn parse(&mut self, catalog: &'c Catalog, raw: &[u8], q: &mut Query) {
        *self = Slot::default();
        match parse(raw, q) {
            Some(kind) => self.prepared.kind = kind,
            None if catalog.has_many_zones() => {
                self.needs_zone = true;
                self.first_origin =
                    catalog.prefetch_first_candidate(q.qname_lower.as_wire(), &q.qname_starts);
            }
            None => {
                let served = catalog.served_name(q.qname_lower.as_wire(), &q.qname_starts);
                let served = for_question(catalog, q, served);
                self.prepared.kind = PreparedKind::Query(served);
                if let Served::Zone(zone) = served {
                    self.load_first_shard(zone, q);
                }
            }
        }
    }

    /// Step 2: starts loading the zone the catalog slot points to.
    fn load_zone(&mut self, catalog: &'c Catalog) {
        if let Some(hash) = self.first_origin.and_then(|c| c.hash) {
            self.likely_zone = catalog.likely_zone(hash);
        }
    }

    /// Step 3: starts loading that zone's origin (to compare with the
    /// name in step 4) and the shard the answer to `q` reads first.
    fn load_shard(&mut self, q: &Query) {
        if let Some(zone) = self.likely_zone {
            zone.prefetch_origin();
            self.load_first_shard(zone, q);
        }
    }

    /// Step 4, with many zones: finds the zone of `q` (in cache when the
    /// guess was right).
    fn find_zone(&mut self, catalog: &'c Catalog, q: &Query) {
        if !self.needs_zone {
            return;
        }
        let (name, starts) = (q.qname_lower.as_wire(), &q.qname_starts);
        let served = catalog.served_from_likely(name, starts, self.first_origin, self.likely_zone);
        let served = for_question(catalog, q, served);
        self.prepared.kind = PreparedKind::Query(served);
        match served {
            // The guess was right: its first lookup is on its way.
            Served::Zone(zone) if self.likely_zone.is_some_and(|z| std::ptr::eq(z, zone)) => {}
            // Wrong: the shard is loaded now, not ahead.
            Served::Zone(zone) => self.load_first_shard(zone, q),
            _ => self.prepared.first_hash = None,
        }
    }

    /// Step 4: starts loading the table slot of the answer's first
    /// lookup, or in a one-shard zone the node it points to.
    #[inline]
    fn load_slot(&self) {
        if let (PreparedKind::Query(Served::Zone(zone)), Some(hash)) =
            (self.prepared.kind, self.prepared.first_hash)
        {
            zone.prefetch_slot(hash);
        }
    }

    /// Step 5: starts loading the node the table slot points to.
    #[inline]
    fn load_node(&self) {
        if let (PreparedKind::Query(Served::Zone(zone)), Some(hash)) =
            (self.prepared.kind, self.prepared.first_hash)
        {
            zone.prefetch_node(hash);
        }
    }

    /// Starts loading the shard of the first name the answer to `q` looks
    /// up in `zone`, and keeps that name's hash, for steps 4 and 5 and for
    /// the answer, which then need not hash it again.
    #[inline]
    fn load_first_shard(&mut self, zone: &Zone, q: &Query) {
        let first = first_lookup(q.qname_lower.as_wire(), &q.qname_starts, zone);
        self.prepared.first_hash = first.map(|name| zone.prefetch_shard(name));
    }
}

/// The first name the answer for `lower` (whose labels start at
/// `starts`) looks up in `zone`, which holds it: the one just below the
/// apex on the way to it (the answer walks down from the apex). None for
/// the apex itself.
fn first_lookup<'q>(lower: &'q [u8], starts: &LabelStarts, zone: &Zone) -> Option<&'q [u8]> {
    let starts = starts.as_slice();
    let below_apex = starts.len().checked_sub(zone.origin_labels() + 1)?;
    let at = *starts.get(below_apex.checked_sub(1)?)?;
    Some(&lower[at as usize..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::answer;
    use crate::zone::load_zone_str;
    use heron_proto::Name;

    fn wire(name: &str) -> Vec<u8> {
        Name::parse(name).unwrap().as_wire().to_vec()
    }

    #[test]
    fn the_first_lookup_is_one_label_below_the_apex() {
        let lookup = |name: &str, origin: &str| {
            let zone = zone(origin, "");
            let lower = wire(name);
            let starts = LabelStarts::of(&lower);
            first_lookup(&lower, &starts, &zone).map(<[u8]>::to_vec)
        };
        let below = Some(wire("b.example.com."));
        assert_eq!(lookup("a.b.example.com.", "example.com."), below);
        assert_eq!(lookup("b.example.com.", "example.com."), below);
        assert_eq!(lookup("example.com.", "example.com."), None);
        assert_eq!(lookup("a.b.com.", "."), Some(wire("com.")));
        assert_eq!(lookup("com.", "."), Some(wire("com.")));
        assert_eq!(lookup(".", "."), None);
    }

    fn query(name: &str, id: u16) -> Vec<u8> {
        let mut q = id.to_be_bytes().to_vec();
        q.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        q.extend_from_slice(&wire(name));
        q.extend_from_slice(&[0, 1, 0, 1]);
        q
    }

    fn zone(origin: &str, records: &str) -> Zone {
        let text = format!("$TTL 300\n@ SOA ns hostmaster 1 2 3 4 5\n@ NS ns\n{records}");
        let origin = Name::parse(origin).unwrap();
        load_zone_str(&text, "t", &origin).unwrap().zone
    }

    const EXAMPLE: &str = "ns A 192.0.2.1\nwww A 192.0.2.2\nsub NS ns.sub\nns.sub A 192.0.2.3\n";

    /// example.com. with a delegation; test. and a.test. (a zone below
    /// another, so that a name in test. has a.test.'s label count). Few
    /// zones: each query's zone is found when it is parsed.
    fn catalog() -> Catalog {
        let mut catalog = Catalog::new();
        catalog.insert(zone("example.com.", EXAMPLE));
        catalog.insert(zone("test.", "www.b A 192.0.2.4\n"));
        catalog.insert(zone("a.test.", "www A 192.0.2.5\n"));
        catalog
    }

    /// The zones of [`catalog`], example.com. made large (many shards),
    /// among a thousand more: every step is taken.
    fn large_and_many() -> &'static Catalog {
        static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
        CATALOG.get_or_init(|| {
            let mut catalog = catalog();
            let hosts: String = (0..20_000).map(|i| format!("h{i} A 192.0.2.9\n")).collect();
            catalog.insert(zone("example.com.", &format!("{EXAMPLE}{hosts}")));
            for i in 0..MANY_ZONES_FOR_TESTS {
                catalog.insert(zone(&format!("z{i}.filler."), ""));
            }
            assert!(catalog.has_many_zones());
            catalog
        })
    }

    /// Enough zones for [`Catalog::has_many_zones`].
    const MANY_ZONES_FOR_TESTS: usize = 1100;

    /// The key (lower-cased wire owner) of the node step 5 loads.
    fn node_loaded(s: &Slot) -> Option<Vec<u8>> {
        let PreparedKind::Query(Served::Zone(zone)) = s.prepared.kind else {
            return None;
        };
        let bytes = zone.likely_node(s.prepared.first_hash?)?;
        Some(bytes[1..1 + bytes[0] as usize].to_vec())
    }

    fn origin_of(zone: Option<&Zone>) -> Option<String> {
        zone.map(|z| z.origin().to_string())
    }

    #[test]
    fn with_few_zones_the_zone_is_found_at_once_and_the_node_loaded_ahead() {
        let catalog = catalog();
        let cases = [
            ("www.example.com.", Some("www.example.com.")),
            ("a.sub.example.com.", Some("sub.example.com.")),
            ("www.b.test.", Some("b.test.")),
            ("example.com.", None),
            ("example.org.", None),
        ];
        let raw: Vec<Vec<u8>> = cases.iter().map(|(n, _)| query(n, 1)).collect();
        let (mut answerer, mut slots) = (BatchAnswerer::default(), Default::default());
        let batch = answerer.prepare(&catalog, raw.iter().map(Vec::as_slice), &mut slots);
        for (i, (name, want)) in cases.iter().enumerate() {
            let slot = &batch.slots[i];
            assert!(slot.first_origin.is_none() && slot.likely_zone.is_none());
            assert_eq!(node_loaded(slot), want.map(wire), "{name}");
        }
    }

    #[test]
    fn the_zone_loaded_ahead_is_the_first_origin_tried() {
        let catalog = large_and_many();
        let cases = [
            ("www.example.com.", Some("example.com.")),
            ("example.com.", Some("example.com.")),
            ("www.a.test.", Some("a.test.")),
            // b.test. is tried first and is no zone: nothing loaded ahead,
            // and the answer finds test. itself.
            ("www.b.test.", None),
            ("example.org.", None),
        ];
        let raw: Vec<Vec<u8>> = cases.iter().map(|(n, _)| query(n, 1)).collect();
        let (mut answerer, mut slots) = (BatchAnswerer::default(), Default::default());
        let batch = answerer.prepare(catalog, raw.iter().map(Vec::as_slice), &mut slots);
        for (i, (name, want)) in cases.iter().enumerate() {
            let got = origin_of(batch.slots[i].likely_zone);
            assert_eq!(got.as_deref(), *want, "{name}");
        }
        let PreparedKind::Query(Served::Zone(zone)) = batch.slots[3].prepared.kind else {
            panic!("www.b.test. is in test.");
        };
        assert_eq!(zone.origin().to_string(), "test.");
        assert_eq!(
            node_loaded(&batch.slots[3]),
            Some(wire("b.test.")),
            "after a wrong guess the right zone's node is loaded"
        );
    }

    #[test]
    fn the_node_loaded_is_the_first_one_the_answer_reads() {
        let catalog = large_and_many();
        let cases = [
            ("www.example.com.", Some("www.example.com.")),
            ("WWW.Example.COM.", Some("www.example.com.")),
            ("a.sub.example.com.", Some("sub.example.com.")),
            ("x.ns.sub.example.com.", Some("sub.example.com.")),
            ("nope.example.com.", None),
            ("example.com.", None),
            ("example.org.", None),
        ];
        let raw: Vec<Vec<u8>> = cases.iter().map(|(n, _)| query(n, 1)).collect();
        let (mut answerer, mut slots) = (BatchAnswerer::default(), Default::default());
        let batch = answerer.prepare(catalog, raw.iter().map(Vec::as_slice), &mut slots);
        for (i, (name, want)) in cases.iter().enumerate() {
            let got = node_loaded(&batch.slots[i]);
            assert_eq!(got, want.map(wire), "{name}");
        }
        assert!(
            batch.slots[4].prepared.first_hash.is_some(),
            "absent names are looked up too"
        );
    }

    /// Whatever the query, well-formed or not, in a zone or not, a batch
    /// answers it byte for byte as `answer` does alone, whether it loads
    /// ahead or not.
    #[test]
    fn a_batch_answers_as_each_query_alone() {
        for mut catalog in [catalog(), large_and_many().clone()] {
            catalog.expire(&Name::parse("gone.example.").unwrap());
            answers_as_alone(&catalog);
        }
    }

    fn answers_as_alone(catalog: &Catalog) {
        let mut raw: Vec<Vec<u8>> = [
            "www.example.com.",
            "WWW.Example.COM.",
            "nope.example.com.",
            "a.sub.example.com.",
            "example.com.",
            "example.org.",
            "www.gone.example.",
            "www.a.test.",
            "www.b.test.",
            "nope.b.test.",
        ]
        .iter()
        .zip(1..)
        .map(|(n, id)| query(n, id))
        .collect();
        raw.push(vec![0; 5]); // too short for a header: dropped
        raw.push(query("www.example.com.", 9)[..20].to_vec()); // cut off: FORMERR
        let mut notify = query("example.com.", 10);
        notify[2] = 0x20; // opcode NOTIFY: deferred
        raw.push(notify);
        let config = AnswerConfig::default();
        let (mut answerer, mut slots) = (BatchAnswerer::default(), Default::default());
        let batch = answerer.prepare(catalog, raw.iter().map(Vec::as_slice), &mut slots);
        assert_eq!(batch.len(), raw.len());
        for (i, q) in raw.iter().enumerate() {
            let (mut batched, mut alone) = (Vec::new(), Vec::new());
            let (how, _) = batch.answer(i, &config, q, Transport::Udp, &mut batched);
            assert_eq!(how, answer(catalog, &config, q, Transport::Udp, &mut alone));
            assert_eq!(batched, alone, "query {i}");
            let rcode = batched.get(3).map(|b| b & 0x0F);
            match i {
                5 => assert_eq!(rcode, Some(5), "not ours: REFUSED"),
                6 => assert_eq!(rcode, Some(2), "expired: SERVFAIL"),
                7 | 8 => assert_eq!(rcode, Some(0), "in a.test. and in test."),
                9 => assert_eq!(rcode, Some(3), "not in test.: NXDOMAIN"),
                _ => {}
            }
        }
    }

    /// A DS query at a child zone's apex, with its parent served here too,
    /// is the parent's to answer (its DS at the cut, AA set); with no
    /// parent served the child answers (NODATA). Batched with few zones
    /// and with many, and alone, all alike.
    #[test]
    fn a_ds_query_at_a_child_apex_is_answered_by_the_parent() {
        let ds =
            "a DS 12345 13 2 0000000000000000000000000000000000000000000000000000000000000000\n";
        for many in [false, true] {
            let mut catalog = Catalog::new();
            catalog.insert(zone("test.", &format!("a NS ns.a\nns.a A 192.0.2.7\n{ds}")));
            catalog.insert(zone("a.test.", "www A 192.0.2.5\n"));
            catalog.insert(zone("example.com.", EXAMPLE));
            if many {
                for i in 0..MANY_ZONES_FOR_TESTS {
                    catalog.insert(zone(&format!("z{i}.filler."), ""));
                }
            }
            assert_eq!(catalog.has_many_zones(), many);
            let ds_query = |name: &str| {
                let mut q = query(name, 7);
                let at = q.len() - 4;
                q[at..at + 2].copy_from_slice(&43u16.to_be_bytes());
                q
            };
            let raw = [
                ds_query("a.test."),
                query("a.test.", 8),
                ds_query("example.com."),
            ];
            let config = AnswerConfig::default();
            let (mut answerer, mut slots) = (BatchAnswerer::default(), Default::default());
            let batch = answerer.prepare(&catalog, raw.iter().map(Vec::as_slice), &mut slots);
            let origin = |i: usize| match batch.slots[i].prepared.kind {
                PreparedKind::Query(Served::Zone(zone)) => zone.origin().to_string(),
                _ => panic!("query {i} has no zone"),
            };
            assert_eq!(origin(0), "test.", "DS at a.test.'s apex (many: {many})");
            assert_eq!(origin(1), "a.test.", "A at a.test.'s apex (many: {many})");
            assert_eq!(origin(2), "example.com.", "no parent served (many: {many})");
            for (i, q) in raw.iter().enumerate() {
                let (mut batched, mut alone) = (Vec::new(), Vec::new());
                batch.answer(i, &config, q, Transport::Udp, &mut batched);
                answer(&catalog, &config, q, Transport::Udp, &mut alone);
                assert_eq!(batched, alone, "query {i} (many: {many})");
            }
            let mut out = Vec::new();
            answer(&catalog, &config, &raw[0], Transport::Udp, &mut out);
            let (aa, rcode, answers) = (
                out[2] & 0x04 != 0,
                out[3] & 0x0F,
                u16::from_be_bytes([out[6], out[7]]),
            );
            assert_eq!(
                (aa, rcode, answers),
                (true, 0, 1),
                "the parent's DS, authoritative"
            );
        }
    }

    #[test]
    fn a_batch_takes_up_to_its_limit() {
        let catalog = catalog();
        let q = query("www.example.com.", 1);
        let mut answerer = BatchAnswerer::default();
        let mut slots = Default::default();
        let batch = answerer.prepare(&catalog, std::iter::repeat_n(&q[..], MAX_BATCH), &mut slots);
        assert_eq!(batch.len(), MAX_BATCH);
    }

    #[test]
    #[should_panic(expected = "more than")]
    fn a_batch_past_its_limit_is_refused() {
        let catalog = catalog();
        let q = query("www.example.com.", 1);
        let mut answerer = BatchAnswerer::default();
        let mut slots = Default::default();
        answerer.prepare(
            &catalog,
            std::iter::repeat_n(&q[..], MAX_BATCH + 1),
            &mut slots,
        );
    }
}
