//! Answering a batch of queries with their memory waits overlapped.
//!
//! In a zone too large for the caches, each lookup waits on memory twice:
//! for the table slot of the name, then for the node the slot points to.
//! Taken one query at a time those waits add up; a server that has a batch
//! in hand (the UDP path's `recvmmsg`) can start them all first.
//! [`BatchAnswerer::prepare`] does, for every query of the batch:
//!
//! 1. parse it, find its zone and start loading the slot of the first
//!    name its answer looks up;
//! 2. then, the slot having arrived, start loading the node it points to;
//!
//! and [`PreparedBatch::answer`] answers each as [`answer`] would, from
//! memory already in the cache. The loads are hints: a guess that misses
//! (a name that is not there) costs a wasted load, never a wrong answer.
//!
//! [`answer`]: crate::answer::answer

use heron_proto::message::Query;

use crate::answer::{
    AnswerConfig, Answered, Prepared, PreparedKind, Transport, answer_prepared, label_offsets,
    prepare,
};
use crate::catalog::{Catalog, Served};

/// The most queries [`BatchAnswerer::prepare`] takes at once.
pub const MAX_BATCH: usize = 32;

/// One worker's parsed queries, kept from batch to batch so that nothing
/// is allocated per batch.
pub struct BatchAnswerer {
    queries: Vec<Query>,
}

/// A batch whose queries are parsed and whose memory is on its way.
pub struct PreparedBatch<'c, 'b> {
    queries: &'b [Query],
    prepared: &'b [Prepared<'c>],
}

impl Default for BatchAnswerer {
    fn default() -> Self {
        BatchAnswerer {
            queries: (0..MAX_BATCH).map(|_| Query::new()).collect(),
        }
    }
}

impl BatchAnswerer {
    /// Steps 1 and 2 for a batch of at most [`MAX_BATCH`] raw queries.
    /// `slots` holds what each query's answer needs; the caller keeps it
    /// on its stack, so nothing per batch is copied or allocated.
    pub fn prepare<'c, 'b, 'q>(
        &'b mut self,
        catalog: &'c Catalog,
        queries: impl IntoIterator<Item = &'q [u8]>,
        slots: &'b mut [Prepared<'c>; MAX_BATCH],
    ) -> PreparedBatch<'c, 'b> {
        let mut n = 0;
        for raw in queries {
            assert!(n < MAX_BATCH, "a batch of more than {MAX_BATCH} queries");
            let q = &mut self.queries[n];
            slots[n] = prepare(catalog, raw, q);
            slots[n].prefetch_slot(q);
            n += 1;
        }
        slots[..n].iter().for_each(Prepared::prefetch_node);
        PreparedBatch {
            queries: &self.queries[..n],
            prepared: &slots[..n],
        }
    }
}

impl PreparedBatch<'_, '_> {
    /// Answers the `i`th query of the batch (`raw`, as given to
    /// [`BatchAnswerer::prepare`]) into `out`, unless it is dropped or
    /// deferred.
    pub fn answer(
        &self,
        i: usize,
        config: &AnswerConfig,
        raw: &[u8],
        transport: Transport,
        out: &mut Vec<u8>,
    ) -> Answered {
        answer_prepared(
            config,
            &self.prepared[i],
            &self.queries[i],
            raw,
            transport,
            out,
        )
    }

    pub fn len(&self) -> usize {
        self.queries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }
}

impl Prepared<'_> {
    /// Starts loading the table slot of the first name the answer to `q`
    /// (the query this was prepared from) looks up.
    fn prefetch_slot(&mut self, q: &Query) {
        if let PreparedKind::Query(Served::Zone(zone)) = self.kind
            && let Some(first) = first_lookup(q.qname_lower.as_wire(), zone.origin().wire_len())
        {
            self.first_lookup = Some(zone.prefetch_slot(first));
        }
    }

    /// Starts loading the node the slot from [`Prepared::prefetch_slot`]
    /// points to.
    fn prefetch_node(&self) {
        if let (PreparedKind::Query(Served::Zone(zone)), Some(hash)) =
            (self.kind, self.first_lookup)
        {
            zone.prefetch_node(hash);
        }
    }
}

/// The first name a lookup of `lower` reads in a zone whose origin is
/// `origin_len` octets: the one just below the apex on the way to `lower`
/// (the answer walks down from the apex). None for the apex itself.
fn first_lookup(lower: &[u8], origin_len: usize) -> Option<&[u8]> {
    label_offsets(lower)
        .take_while(|&at| lower.len() - at > origin_len)
        .last()
        .map(|at| &lower[at..])
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
        let origin = wire("example.com.");
        let name = wire("a.b.example.com.");
        assert_eq!(
            first_lookup(&name, origin.len()),
            Some(&wire("b.example.com.")[..])
        );
        let child = wire("b.example.com.");
        assert_eq!(first_lookup(&child, origin.len()), Some(&child[..]));
        assert_eq!(first_lookup(&origin, origin.len()), None);
        assert_eq!(first_lookup(&wire("com."), 1), Some(&wire("com.")[..]));
    }

    fn query(name: &str, id: u16) -> Vec<u8> {
        let mut q = id.to_be_bytes().to_vec();
        q.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        q.extend_from_slice(&wire(name));
        q.extend_from_slice(&[0, 1, 0, 1]);
        q
    }

    fn catalog() -> Catalog {
        let text = "$ORIGIN example.com.\n$TTL 300\n\
                    @ SOA ns hostmaster 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n\
                    www A 192.0.2.2\nsub NS ns.sub\nns.sub A 192.0.2.3\n";
        let origin = Name::parse("example.com.").unwrap();
        let mut catalog = Catalog::new();
        catalog.insert(load_zone_str(text, "t", &origin).unwrap().zone);
        catalog
    }

    /// The key (lower-cased wire owner) of the node step 2 loads.
    fn node_loaded(p: &Prepared) -> Option<Vec<u8>> {
        let PreparedKind::Query(Served::Zone(zone)) = p.kind else {
            return None;
        };
        let bytes = zone.likely_node(p.first_lookup?)?;
        Some(bytes[1..1 + bytes[0] as usize].to_vec())
    }

    #[test]
    fn the_node_loaded_is_the_first_one_the_answer_reads() {
        let catalog = catalog();
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
        let batch = answerer.prepare(&catalog, raw.iter().map(Vec::as_slice), &mut slots);
        for (i, (name, want)) in cases.iter().enumerate() {
            let got = node_loaded(&batch.prepared[i]);
            assert_eq!(got, want.map(wire), "{name}");
        }
        assert!(
            batch.prepared[4].first_lookup.is_some(),
            "absent names are looked up too"
        );
    }

    /// Whatever the query, well-formed or not, in a zone or not, a batch
    /// answers it byte for byte as `answer` does alone.
    #[test]
    fn a_batch_answers_as_each_query_alone() {
        let mut catalog = catalog();
        catalog.expire(&Name::parse("gone.example.").unwrap());
        let mut raw: Vec<Vec<u8>> = [
            "www.example.com.",
            "WWW.Example.COM.",
            "nope.example.com.",
            "a.sub.example.com.",
            "example.com.",
            "example.org.",
            "www.gone.example.",
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
        let batch = answerer.prepare(&catalog, raw.iter().map(Vec::as_slice), &mut slots);
        assert_eq!(batch.len(), raw.len());
        for (i, q) in raw.iter().enumerate() {
            let (mut batched, mut alone) = (Vec::new(), Vec::new());
            let how = batch.answer(i, &config, q, Transport::Udp, &mut batched);
            assert_eq!(
                how,
                answer(&catalog, &config, q, Transport::Udp, &mut alone)
            );
            assert_eq!(batched, alone, "query {i}");
            let rcode = batched.get(3).map(|b| b & 0x0F);
            match i {
                5 => assert_eq!(rcode, Some(5), "not ours: REFUSED"),
                6 => assert_eq!(rcode, Some(2), "expired: SERVFAIL"),
                _ => {}
            }
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
