//! The answer engine: a pure function of (catalog, query) to a response.
//!
//! It follows RFC 1034 4.3.2: find the zone, walk down from its apex to the
//! query name, stopping at a delegation (referral) or a DNAME (RFC 6672);
//! answer from the node that matches, from a wildcard at the closest
//! encloser (RFC 4592), or say NXDOMAIN/NODATA with the SOA (RFC 2308).
//! CNAMEs are followed inside the zone. It knows nothing of sockets.
//!
//! * `chaos`: the CHAOS class names operators ask (`version.bind`,
//!   `id.server`), answered from the configuration.
//! * [`denial`]: the NSEC and NSEC3 records that prove what a signed zone
//!   does not have.
//! * [`lookahead`]: answering a batch of queries with their memory waits
//!   overlapped.

mod chaos;
mod denial;
pub mod lookahead;

use std::mem::ManuallyDrop;

use heron_proto::cookie;
use heron_proto::edns::{self, OPT_LEN};
use heron_proto::encoded::{AdditionalRef, Owner, Written};
use heron_proto::message::{self, HEADER_LEN, Header, Query, QueryError, flags, response_flags};
use heron_proto::name::{LabelStarts, MAX_NAME_LEN, NameBuf, suffixes};
use heron_proto::writer::{self, Full, Mark, Section, Writer};
use heron_proto::{Class, Opcode, RType, Rcode};

use crate::catalog::{Catalog, Served};
use crate::zone::chain::DenialChain;
use crate::zone::wildcard::WildcardName;
use crate::zone::{Node, RRset, Zone};
use denial::Denial;

/// How the query arrived: it decides the response size limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

/// Server-wide settings the answers depend on.
#[derive(Clone, Debug)]
pub struct AnswerConfig {
    /// Largest UDP response we send, whatever the client offers (RFC 6891
    /// 6.2.5; 1232 avoids IP fragmentation on common paths).
    pub max_udp_payload: u16,
    /// Answer for CH TXT `version.bind` / `version.server`; REFUSED if
    /// None or empty.
    pub version: Option<String>,
    /// Answer for CH TXT `id.server` / `hostname.bind`; REFUSED if None or
    /// empty.
    pub identity: Option<String>,
}

impl Default for AnswerConfig {
    fn default() -> Self {
        AnswerConfig {
            max_udp_payload: 1232,
            version: None,
            identity: None,
        }
    }
}

/// Longest CNAME/DNAME chain followed inside a zone.
const MAX_CHAIN: usize = 16;
/// The proofs for the wildcard CNAMEs of a chain: one NSEC or NSEC3 node
/// each (RFC 4035 3.1.3.3, RFC 5155 7.2.6), at most one a hop.
type Deferred<'a> = [Option<Node<'a>>; MAX_CHAIN];

/// What [`answer`] did with a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answered {
    /// A response is in `out`.
    Response,
    /// Nothing should be sent: too short to be a query, or a response.
    Drop,
    /// A zone transfer, NOTIFY or TSIG-signed message: the caller's query
    /// pipeline handles it (ACLs, keys and transfer state live there).
    Deferred,
}

/// What the engine knows of a response it wrote that the response's
/// header does not say, for the query processor's rate limiting: an
/// answer synthesized from a wildcard is keyed by that wildcard (as BIND
/// and Knot key it), and an rcode above 15 needs the OPT record.
/// Returned with the answer: two octets, set at no cost to an answer
/// that is neither.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Where, in the query name, the closest encloser of the wildcard the
    /// name matched starts (the wildcard is `*.` and that encloser), or
    /// the owner of the DNAME it is below; 0: neither. A later step of a
    /// CNAME chain does not count: the query name is what varies.
    wildcard_at: u8,
    /// The rcode is above 15: its upper bits are in the OPT record.
    extended_rcode: bool,
}

impl Summary {
    /// Of a response neither from a wildcard nor with an extended rcode
    /// (the default).
    pub const PLAIN: Summary = Summary {
        wildcard_at: 0,
        extended_rcode: false,
    };

    /// The name the answer to `qname` (the query name in wire form, as
    /// the question holds it) is about: the closest encloser of the
    /// wildcard it was synthesized from, a suffix of `qname`, else
    /// `qname` itself. Without a branch: at 0 the suffix is the name.
    #[inline]
    pub fn about<'q>(&self, qname: &'q [u8]) -> &'q [u8] {
        qname.get(usize::from(self.wildcard_at)..).unwrap_or(qname)
    }

    /// Whether the rcode is an extended one (BADVERS): the header's four
    /// bits alone read as another.
    #[inline]
    pub fn extended_rcode(&self) -> bool {
        self.extended_rcode
    }
}

/// Answers `query` into `out`, unless it is dropped or deferred.
pub fn answer(
    catalog: &Catalog,
    config: &AnswerConfig,
    query: &[u8],
    transport: Transport,
    out: &mut Vec<u8>,
) -> Answered {
    QUERY.with_borrow_mut(|q| {
        let prepared = prepare(catalog, query, q);
        answer_prepared(config, &prepared, q, query, transport, out).0
    })
}

thread_local! {
    /// The parsed query, reused by every query on this thread: building a
    /// new one zeroed its 255-byte name buffer each time, 35 instructions
    /// (1.5% of a root referral). Every field is set by each parse.
    static QUERY: std::cell::RefCell<Query> = std::cell::RefCell::new(Query::new());
}

/// A query parsed and its zone found: the first half of [`answer`], which
/// a batch does for all its queries before answering any (see
/// [`crate::lookahead`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Prepared<'c> {
    pub(crate) kind: PreparedKind<'c>,
    /// For a query in a zone: the hash, in that zone, of the first name
    /// the answer looks up (the one just below the apex), when a batch
    /// computed it already to load it ahead ([`crate::lookahead`]).
    pub(crate) first_hash: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum PreparedKind<'c> {
    #[default]
    Drop,
    FormErr,
    Deferred,
    /// A query for the engine, and where its name is served.
    Query(Served<'c>),
}

/// Parses `query` into `q` and finds the zone of its name.
pub fn prepare<'c>(catalog: &'c Catalog, query: &[u8], q: &mut Query) -> Prepared<'c> {
    let kind = parse(query, q).unwrap_or_else(|| {
        let served = catalog.served_name(q.qname_lower.as_wire(), &q.qname_starts);
        PreparedKind::Query(for_question(catalog, q, served))
    });
    Prepared {
        kind,
        first_hash: None,
    }
}

/// Parses `query` into `q`: what becomes of it, or None for a query the
/// engine answers once its zone is found.
pub(crate) fn parse(query: &[u8], q: &mut Query) -> Option<PreparedKind<'static>> {
    match message::parse_query_into(query, q) {
        Ok(()) if is_deferred(q) => Some(PreparedKind::Deferred),
        Ok(()) => None,
        Err(QueryError::Drop) => Some(PreparedKind::Drop),
        Err(QueryError::FormErr(_)) => Some(PreparedKind::FormErr),
    }
}

/// Answers a query [`prepare`] parsed into `q` into `out`, unless it is
/// dropped or deferred, and summarizes the response.
pub fn answer_prepared(
    config: &AnswerConfig,
    prepared: &Prepared,
    q: &Query,
    query: &[u8],
    transport: Transport,
    out: &mut Vec<u8>,
) -> (Answered, Summary) {
    match prepared.kind {
        PreparedKind::Drop => (Answered::Drop, Summary::PLAIN),
        PreparedKind::Deferred => (Answered::Deferred, Summary::PLAIN),
        PreparedKind::FormErr => {
            let header = Header::read(query).expect("FormErr implies a header");
            write_error(out, &header, header.unreadable_rcode());
            (Answered::Response, Summary::PLAIN)
        }
        PreparedKind::Query(served) => {
            let mut r = Responder::new(q, query, config, transport, 0, out);
            r.first_hash = prepared.first_hash;
            r.respond(served);
            (Answered::Response, r.finish())
        }
    }
}

/// Whether a query is for the query pipeline rather than the engine alone
/// (a question-less query for a server cookie too).
pub fn is_deferred(q: &Query) -> bool {
    q.tsig.is_some()
        || !q.has_question()
        || q.header.opcode() == Opcode::NOTIFY
        || q.header.opcode() == Opcode::UPDATE
        || matches!(q.qtype, RType::AXFR | RType::IXFR)
}

/// Answers a query already parsed from `query`, leaving `reserve` bytes
/// of the size limit free (for a TSIG record the caller appends).
pub fn answer_parsed(
    catalog: &Catalog,
    config: &AnswerConfig,
    q: &Query,
    query: &[u8],
    transport: Transport,
    reserve: usize,
    out: &mut Vec<u8>,
) {
    let mut r = Responder::new(q, query, config, transport, reserve, out);
    let served = catalog.served_name(q.qname_lower.as_wire(), &q.qname_starts);
    r.respond(for_question(catalog, q, served));
    r.finish();
}

/// The zone that answers `q`, given the zone its name is `served` from:
/// that zone, except for a DS query at a zone's apex (served, or expired)
/// when a zone above it is served here too. The DS RRset is the parent's data (RFC 4035
/// 3.1.4.1), so the parent answers it, as NSD, Knot and BIND do; a server
/// of the child alone answers from the child (NODATA).
#[inline(always)]
pub fn for_question<'c>(catalog: &'c Catalog, q: &Query, served: Served<'c>) -> Served<'c> {
    match served {
        Served::Zone(zone)
            if q.qtype == RType::DS && zone.origin_labels() == q.qname_starts.labels() =>
        {
            let name = q.qname_lower.as_wire();
            match catalog.zone_above(name, &q.qname_starts, zone) {
                Some(parent) => Served::Zone(parent),
                None => served,
            }
        }
        // The child expired: its parent's DS is still served, as BIND does.
        Served::Expired if q.qtype == RType::DS => {
            let name = q.qname_lower.as_wire();
            match catalog.parent_of_expired(name, &q.qname_starts) {
                Some(parent) => Served::Zone(parent),
                None => served,
            }
        }
        _ => served,
    }
}

/// Octets a response's COOKIE option takes, if the query had one.
fn cookie_room(option: &edns::CookieOption) -> usize {
    match option {
        edns::CookieOption::Absent => 0,
        _ => edns::OPTION_HEADER_LEN + edns::CLIENT_COOKIE_LEN + cookie::SERVER_COOKIE_LEN,
    }
}

/// A header-only error response (the question could not be read).
pub fn write_error(out: &mut Vec<u8>, header: &Header, rcode: Rcode) {
    writer::header_response(out, header, &[], rcode, false);
}

struct Responder<'a> {
    q: &'a Query,
    /// The query name as sent (case preserved).
    qname: &'a [u8],
    config: &'a AnswerConfig,
    transport: Transport,
    w: Writer<'a>,
    after_question: Mark,
    /// Where the zone's apex sits in the question name.
    apex_pos: u16,
    /// The hash of the query name's first lookup, if known ([`Prepared`]).
    first_hash: Option<u64>,
    rcode: Rcode,
    aa: bool,
    tc: bool,
    dnssec: bool,
    /// [`Summary::wildcard_at`]: set when the query name matched a wildcard.
    wildcard_at: u8,
    /// REFUSED because no zone holds the name: the OPT record says so
    /// with Extended DNS Error 20, as NSD and Knot do (RFC 8914 4.21).
    not_authoritative: bool,
    /// The addresses to add for the NS/MX/SRV RRset written, and where
    /// that RRset was written (their owners point into it).
    additional: Option<(AdditionalRef<'a>, Written)>,
    /// Proofs for the wildcard CNAMEs of a chain, written to the
    /// authority section once the answer section is complete. None but
    /// for a chain through a wildcard CNAME in a signed zone with DO set.
    /// `answer_in` always takes it, so the Responder has no drop glue: an
    /// answer without proofs pays one test for them.
    deferred_proofs: ManuallyDrop<Option<Box<Deferred<'a>>>>,
}

/// What a step of resolution leaves to do. Small on purpose: it is
/// returned on every query, and a name in it was a 264-byte copy each time.
enum Next {
    Done,
    /// Continue at the target the step wrote (a [`Target`]), reached from
    /// `node`'s CNAME or DNAME ([`followed_as`]); `at` is where that name
    /// already sits in the response, if it can be pointed to.
    Follow {
        node: usize,
        at: Option<u16>,
    },
}

/// A node followed in a chain, as [`Responder::resolve`] keeps it: its id
/// and whether a wildcard's CNAME was followed for another name. A
/// wildcard node met again by its own name (`*.w CNAME *.w`) owns a new
/// record, which NSD and Knot write (black-box finding DG-6); only the
/// same node met the same way again is a loop.
fn followed_as(node: &Node, wildcard: bool) -> usize {
    node.id() << 1 | usize::from(wildcard)
}

/// Where a step that follows a CNAME or DNAME puts the name to follow:
/// filled only then, so other answers never initialize a name buffer.
type Target = Option<NameBuf>;

/// A node a name matched, and whether through a wildcard.
#[derive(Clone, Copy)]
struct Matched<'z> {
    node: Node<'z>,
    wildcard: bool,
}

/// Where the walk from the apex to a name ended.
enum Found<'z> {
    /// The name exists (possibly an empty non-terminal).
    Exact(Node<'z>),
    /// No such name; a wildcard at the closest encloser matches.
    Wildcard(Node<'z>),
    /// A delegation at or above the name.
    Referral(Node<'z>),
    /// A DNAME above the name.
    Dname(Node<'z>),
    /// No such name; the node is its closest encloser.
    NxDomain(Node<'z>),
}

impl<'a> Responder<'a> {
    #[inline(always)]
    fn new(
        q: &'a Query,
        query: &'a [u8],
        config: &'a AnswerConfig,
        transport: Transport,
        reserve: usize,
        out: &'a mut Vec<u8>,
    ) -> Responder<'a> {
        // Inlined into its callers (see there) so the Responder is built
        // where it lives rather than built and copied.
        let limit = match (transport, q.edns) {
            (Transport::Tcp, _) => u16::MAX as usize,
            (Transport::Udp, None) => 512,
            (Transport::Udp, Some(e)) => e.udp_size.min(config.max_udp_payload.max(512)) as usize,
        };
        // Room for the OPT record, and for the COOKIE option the query
        // processor's cookie layer appends to it when the query has one.
        let reserve = reserve
            + q.edns
                .map_or(0, |e| OPT_LEN + cookie_room(&e.options.cookie));
        let mut w = Writer::new(out, limit.saturating_sub(reserve).max(HEADER_LEN));
        w.question_raw(&query[q.question.clone()]);
        Responder {
            q,
            qname: &query[q.qname.clone()],
            after_question: w.mark(),
            apex_pos: 0,
            first_hash: None,
            config,
            transport,
            w,
            rcode: Rcode::NOERROR,
            aa: false,
            tc: false,
            dnssec: q.edns.is_some_and(|e| e.do_bit),
            wildcard_at: 0,
            not_authoritative: false,
            additional: None,
            deferred_proofs: ManuallyDrop::new(None),
        }
    }

    /// `served`: where the query name's answers come from.
    fn respond(&mut self, served: Served<'a>) {
        let q = self.q;
        if let Some(e) = q.edns
            && e.version > 0
        {
            self.rcode = Rcode::BADVERS;
            return;
        }
        if q.header.opcode() != Opcode::QUERY {
            self.rcode = Rcode::NOTIMP;
            return;
        }
        // Other meta types (OPT, TSIG, TKEY, MAILA, MAILB, 128 to 250)
        // are looked up as any type is, and found nowhere: NODATA or
        // NXDOMAIN with the SOA, a referral below a cut, as NSD and Knot
        // answer them.
        if matches!(q.qtype, RType::AXFR | RType::IXFR) {
            self.rcode = Rcode::REFUSED;
            return;
        }
        match q.qclass {
            Class::IN => self.answer_in(served),
            Class::CH => self.answer_chaos(),
            Class::ANY => self.answer_any_class(served),
            _ => self.rcode = Rcode::REFUSED,
        }
    }

    /// QCLASS ANY (RFC 1035 3.2.5) matches our only class of data, IN,
    /// and is answered from it as NSD does: not authoritative (we cannot
    /// know every class holds nothing more), so a negative answer carries
    /// no SOA to cache it by (`negative`).
    #[inline(never)]
    fn answer_any_class(&mut self, served: Served<'a>) {
        self.answer_in(served);
        self.aa = false;
    }

    fn answer_in(&mut self, served: Served<'a>) {
        let q: &'a Query = self.q;
        let zone = match served {
            Served::Zone(zone) => zone,
            Served::Expired => return self.rcode = Rcode::SERVFAIL,
            Served::NotServed => {
                self.not_authoritative = true;
                return self.rcode = Rcode::REFUSED;
            }
        };
        self.aa = true;
        let apex_len = zone.origin().wire_len();
        self.apex_pos = (HEADER_LEN + q.qname_lower.as_wire().len() - apex_len) as u16;
        let answered = self.resolve(zone);
        let answered = match self.deferred_proofs.take() {
            None => answered,
            Some(deferred) => answered.and_then(|()| self.write_deferred_proofs(zone, &deferred)),
        };
        if answered.is_err() {
            self.truncate();
            return;
        }
        self.write_additional();
    }

    /// Answers for the query name in `zone`, following CNAMEs and DNAMEs
    /// inside it. The first step works on the query's own buffers; only a
    /// chain needs copies.
    fn resolve(&mut self, zone: &'a Zone) -> Result<(), Full> {
        let (q, qname) = (self.q, self.qname);
        let question = Some(HEADER_LEN as u16);
        let mut target: Target = None;
        let lower = (q.qname_lower.as_wire(), q.qname_starts.as_slice());
        let first_hash = self.first_hash;
        let mut next = self.step(zone, lower, first_hash, qname, question, &[], &mut target)?;
        if let Next::Done = next {
            return Ok(()); // no chain: most answers
        }
        // Nodes whose CNAME or DNAME was followed: meeting a CNAME again
        // is a loop. Names looked up: looking one up again is a loop
        // (through DNAMEs too), by the zone's hash of its lower-cased form.
        let mut followed = [0usize; MAX_CHAIN];
        let mut looked_up = [0u64; MAX_CHAIN + 1];
        looked_up[0] = zone.hash(lower.0);
        for hop in 0..MAX_CHAIN {
            let Next::Follow { node, at } = next else {
                return Ok(());
            };
            let name = target.take().expect("a step that follows wrote its target");
            followed[hop] = node;
            let mut lower = name.clone();
            lower.make_lowercase();
            if !in_zone(zone, lower.as_wire()) {
                return Ok(());
            }
            let hash = zone.hash(lower.as_wire());
            if looked_up[..=hop].contains(&hash) {
                return Ok(()); // a loop
            }
            looked_up[hop + 1] = hash;
            let starts = LabelStarts::of(lower.as_wire());
            let lower = (lower.as_wire(), starts.as_slice());
            next = self.step(
                zone,
                lower,
                None,
                name.as_wire(),
                at,
                &followed[..=hop],
                &mut target,
            )?;
        }
        Ok(())
    }

    /// One step of [`Responder::resolve`]: answers at `name` (`lower` is
    /// its lower-cased form and where its labels start; `first_hash`, the
    /// hash of its first lookup if known; `at`, where it already sits in
    /// the response), or writes a CNAME/DNAME and says where to go next
    /// (into `target`).
    #[allow(clippy::too_many_arguments)]
    fn step(
        &mut self,
        zone: &'a Zone,
        (lower, starts): (&[u8], &[u8]),
        first_hash: Option<u64>,
        name: &[u8],
        at: Option<u16>,
        followed: &[usize],
        target: &mut Target,
    ) -> Result<Next, Full> {
        let here = owner_of(zone, name, at);
        let qtype = self.q.qtype;
        let first = followed.is_empty();
        match find(zone, lower, starts, first_hash, qtype) {
            Found::Referral(cut) => self.referral(zone, cut, lower, first).map(|_| Next::Done),
            Found::NxDomain(encloser) => {
                self.rcode = Rcode::NXDOMAIN;
                self.negative(zone)?;
                let denial = Denial::NxDomain { encloser };
                self.prove(zone, lower, denial).map(|_| Next::Done)
            }
            // One DNAME may rewrite several names of a chain (a CNAME
            // back below it): only a name met again is a loop (`resolve`).
            Found::Dname(node) => {
                if first {
                    // Every name below it gets this answer: about its owner.
                    self.wildcard_at = (lower.len() - node.owner_wire().len()) as u8;
                }
                // Passed before in this chain: its RRset is in the answer
                // already (RFC 2181 5: no duplicates), only the CNAME is new.
                let again = followed.contains(&followed_as(&node, false));
                self.dname(zone, node, name, again, target)
            }
            Found::Exact(node) => self.at_node(zone, node, here, lower, followed, false, target),
            Found::Wildcard(node) => {
                if first {
                    self.note_wildcard(lower, node);
                }
                self.at_node(zone, node, here, lower, followed, true, target)
            }
        }
    }

    /// Keeps where the closest encloser of the wildcard `source`, which
    /// the query name `lower` matched, starts in that name: the name less
    /// the encloser's length (the wildcard's, less its `*` label).
    fn note_wildcard(&mut self, lower: &[u8], source: Node) {
        let encloser_len = source.owner_wire().len() - 2;
        // A name is at most 255 octets, and its encloser a proper suffix.
        self.wildcard_at = (lower.len() - encloser_len) as u8;
    }

    /// [`Responder::step`] at the node that `lower` matched, itself or
    /// (`wildcard`) through a wildcard: its CNAME to follow, or its data.
    /// Inlined: it is the path of every positive answer.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn at_node(
        &mut self,
        zone: &'a Zone,
        node: Node<'a>,
        here: Owner,
        lower: &[u8],
        followed: &[usize],
        wildcard: bool,
        target: &mut Target,
    ) -> Result<Next, Full> {
        let qtype = self.q.qtype;
        // The flag first: most nodes hold no CNAME, and the RRset walk is
        // a call.
        // Beside a CNAME only the CNAME's own NSEC and signatures may be
        // (RFC 2181 10.1, RFC 4035 2.5): an RRset asked for that is there
        // is the answer (as NSD and Knot give it), and a query for those
        // two types is answered here even when they are not (NODATA, as
        // Knot and BIND: a resolver takes a CNAME for them as an error);
        // anything else follows.
        let cname = match node.has_cname() && qtype != RType::ANY {
            true if node.rrset(qtype).is_some() => None,
            true if matches!(qtype, RType::NSEC | RType::RRSIG) => None,
            true => node.rrset(RType::CNAME),
            false => None,
        };
        match cname {
            Some(c) => {
                // A wildcard met again owns a new name (its own target,
                // say): that CNAME is written, as NSD and Knot write it,
                // and the name it leads to, met before, ends the chain in
                // `resolve` (black-box finding DA-3).
                if !wildcard && followed.contains(&followed_as(&node, false)) {
                    return Ok(Next::Done); // a CNAME loop
                }
                let written = self.rrset(Section::Answer, here, c)?;
                if wildcard && self.dnssec {
                    self.defer_proof(zone, lower, Denial::Wildcard { source: node });
                }
                let name = target.insert(NameBuf::new());
                c.first_name(name);
                let at = u16::try_from(written.first_rdata)
                    .ok()
                    .filter(|&p| p <= 0x3FFF);
                Ok(Next::Follow {
                    node: followed_as(&node, wildcard),
                    at,
                })
            }
            _ => {
                let matched = Matched { node, wildcard };
                self.answer_node(zone, matched, here, lower)
                    .map(|_| Next::Done)
            }
        }
    }

    /// RFC 6672: the DNAME, a CNAME synthesized for the name, then on.
    fn dname(
        &mut self,
        zone: &'a Zone,
        node: Node<'a>,
        name: &[u8],
        written: bool,
        next: &mut Target,
    ) -> Result<Next, Full> {
        let dname = node.rrset(RType::DNAME).expect("found by DNAME");
        if !written {
            let dname_owner = owner_of(zone, node.owner_wire(), None);
            self.rrset(Section::Answer, dname_owner, dname)?;
        }
        let Some(target) = dname_target(name, node, &dname.first_rdata()) else {
            self.rcode = Rcode(6); // YXDOMAIN (RFC 6672 2.2)
            return Ok(Next::Done);
        };
        self.w.section(Section::Answer);
        self.w
            .record(name, RType::CNAME, Class::IN, dname.ttl(), target.as_wire())?;
        if self.q.qtype == RType::CNAME {
            return Ok(Next::Done); // the synthesized CNAME is the answer
        }
        *next = Some(target);
        Ok(Next::Follow {
            node: followed_as(&node, false),
            at: None,
        })
    }

    /// Data at a matching node, or NODATA. Inlined: the path of every
    /// positive answer.
    #[inline(always)]
    fn answer_node(
        &mut self,
        zone: &'a Zone,
        matched: Matched<'a>,
        owner: Owner,
        lower: &[u8],
    ) -> Result<(), Full> {
        let qtype = self.q.qtype;
        if qtype == RType::ANY {
            return self.answer_any(zone, matched, owner, lower);
        }
        if qtype == RType::RRSIG {
            return self.answer_rrsig(zone, matched, owner, lower);
        }
        match matched.node.rrset(qtype) {
            Some(set) => {
                let written = self.rrset(Section::Answer, owner, set)?;
                self.note_additional(set, written);
                self.prove_expansion(zone, matched, lower)
            }
            None => self.no_data(zone, matched, lower),
        }
    }

    /// RFC 8482: over UDP one RRset of the name (not its NSEC, of no use
    /// to the asker, where it holds another); over TCP all of them, or
    /// those that fit in one message when all do not (there is no larger
    /// message to retry in: an empty answer with TC left the asker
    /// nothing, where NSD and Knot answer a subset).
    fn answer_any(
        &mut self,
        zone: &'a Zone,
        matched: Matched<'a>,
        owner: Owner,
        lower: &[u8],
    ) -> Result<(), Full> {
        if matched.node.is_empty() {
            return self.no_data(zone, matched, lower);
        }
        if self.transport == Transport::Udp {
            let mut sets = matched.node.data();
            let first = sets.next().expect("not empty");
            let set = match first.rtype {
                RType::NSEC => sets.next().unwrap_or(first),
                _ => first,
            };
            self.rrset(Section::Answer, owner, set)?;
            return self.prove_expansion(zone, matched, lower);
        }
        let (mut owner, mut answered) = (owner, false);
        for set in matched.node.data() {
            let mark = self.w.mark();
            match self.rrset(Section::Answer, owner, set) {
                Ok(written) => {
                    owner = written.next_owner(owner);
                    answered = true;
                }
                // Its records, or its signatures, did not fit: the whole
                // RRset is left out.
                Err(Full) => self.w.rollback(mark),
            }
        }
        if !answered {
            return Err(Full);
        }
        self.prove_expansion(zone, matched, lower)
    }

    /// QTYPE RRSIG, as NSD, Knot and BIND answer it: every signature at
    /// the name, with or without DO, those over a type the name lacks too
    /// (a pre-signed zone edited by hand: AXFR served them, and a query
    /// answered NODATA); NODATA where there are none (an unsigned zone).
    fn answer_rrsig(
        &mut self,
        zone: &'a Zone,
        matched: Matched<'a>,
        owner: Owner,
        lower: &[u8],
    ) -> Result<(), Full> {
        let mut owner = owner;
        let mut signed = false;
        self.w.section(Section::Answer);
        for set in matched.node.rrsets().filter(|s| s.has_sigs()) {
            let written = set
                .encoded_sigs()
                .write(&mut self.w, owner, self.apex_pos)?;
            owner = written.next_owner(owner);
            signed = true;
        }
        match signed {
            true => self.prove_expansion(zone, matched, lower),
            false => self.no_data(zone, matched, lower),
        }
    }

    /// NODATA: the negative SOA, and in a signed zone the proof that the
    /// name (or the wildcard it matched) lacks the type.
    fn no_data(&mut self, zone: &'a Zone, matched: Matched<'a>, lower: &[u8]) -> Result<(), Full> {
        self.negative(zone)?;
        let denial = match matched.wildcard {
            true => Denial::WildcardNoData {
                source: matched.node,
            },
            false => Denial::NoData { node: matched.node },
        };
        self.prove(zone, lower, denial)
    }

    /// Data answered from a wildcard: in a signed zone, the proof that no
    /// closer name matched (RFC 4035 3.1.3.3).
    fn prove_expansion(
        &mut self,
        zone: &'a Zone,
        matched: Matched<'a>,
        lower: &[u8],
    ) -> Result<(), Full> {
        match matched.wildcard {
            true => self.prove(
                zone,
                lower,
                Denial::Wildcard {
                    source: matched.node,
                },
            ),
            false => Ok(()),
        }
    }

    /// With DO set and a signed zone, the NSEC or NSEC3 records (and
    /// their RRSIGs) that prove `denial` for `lower`, in the authority
    /// section. Answers to unsigned zones or without DO pay one test.
    fn prove(&mut self, zone: &'a Zone, lower: &[u8], denial: Denial<'a>) -> Result<(), Full> {
        match zone.denial_chain() {
            Some(chain) if self.dnssec => self.write_proof(zone, chain, lower, denial),
            _ => Ok(()),
        }
    }

    #[inline(never)]
    fn write_proof(
        &mut self,
        zone: &'a Zone,
        chain: &'a DenialChain,
        lower: &[u8],
        denial: Denial<'a>,
    ) -> Result<(), Full> {
        let proof = denial::prove(zone, chain, lower, denial);
        proof
            .records()
            .try_for_each(|(node, set)| self.write_proof_record(zone, node, set))
    }

    /// One NSEC or NSEC3 RRset of a proof, and its RRSIGs.
    fn write_proof_record(&mut self, zone: &Zone, node: Node, set: RRset) -> Result<(), Full> {
        if let Some(deferred) = self.deferred_proofs.as_mut() {
            let same = deferred
                .iter_mut()
                .filter(|kept| kept.is_some_and(|k| k.id() == node.id()));
            same.for_each(|kept| *kept = None);
        }
        // The NSEC of a NODATA answer is owned by the query name, and a
        // covering one often by an ancestor of it: a pointer into the
        // question then, as NSD and Knot compress it (answers were up to
        // 14 octets longer, and truncated where theirs fit).
        let owner = match suffix_at(self.qname, node.owner_wire()) {
            Some(at) => Owner::At((HEADER_LEN + at) as u16),
            None => Owner::BelowApex(node.owner_wire(), zone.origin().wire_len()),
        };
        self.rrset(Section::Authority, owner, set).map(|_| ())
    }

    /// [`Responder::prove`] for a step in the middle of a CNAME chain,
    /// whose proof must wait until the answer section is complete.
    #[inline(never)]
    fn defer_proof(&mut self, zone: &'a Zone, lower: &[u8], denial: Denial<'a>) {
        if let Some(chain) = zone.denial_chain() {
            let proof = denial::prove(zone, chain, lower, denial);
            let deferred = self
                .deferred_proofs
                .get_or_insert_with(|| Box::new([None; MAX_CHAIN]));
            // A record two steps prove (or the last step's proof, which
            // `write_proof_record` takes out) is written once (RFC 2181 5).
            for (node, _) in proof.records() {
                if deferred.iter().flatten().any(|kept| kept.id() == node.id()) {
                    continue;
                }
                match deferred.iter_mut().find(|slot| slot.is_none()) {
                    Some(slot) => *slot = Some(node),
                    None => break,
                }
            }
        }
    }

    /// The proofs [`Responder::defer_proof`] kept, once the answer section
    /// is complete.
    #[inline(never)]
    fn write_deferred_proofs(
        &mut self,
        zone: &'a Zone,
        deferred: &Deferred<'a>,
    ) -> Result<(), Full> {
        let Some(chain) = zone.denial_chain() else {
            return Ok(());
        };
        let rtype = chain.kind().rtype();
        for node in deferred.iter().flatten() {
            if let Some(set) = node.rrset(rtype) {
                self.write_proof_record(zone, *node, set)?;
            }
        }
        Ok(())
    }

    /// NXDOMAIN or NODATA: the SOA in the authority section with the TTL
    /// RFC 2308 section 5 asks for.
    fn negative(&mut self, zone: &Zone) -> Result<(), Full> {
        if self.q.qclass == Class::ANY {
            return Ok(()); // not authoritative: see `answer_any_class`
        }
        self.w.section(Section::Authority);
        let owner = Owner::At(self.apex_pos);
        let (soa, ttl) = (zone.soa(), zone.negative_ttl());
        soa.encoded()
            .write_ttl_capped(&mut self.w, owner, self.apex_pos, ttl)?;
        if self.dnssec {
            soa.encoded_sigs()
                .write_ttl_capped(&mut self.w, owner, self.apex_pos, ttl)?;
        }
        Ok(())
    }

    /// A referral: NS of the cut in authority, glue in additional, AA clear
    /// unless a CNAME from this zone led here.
    fn referral(
        &mut self,
        zone: &'a Zone,
        cut: Node<'a>,
        lower: &[u8],
        first: bool,
    ) -> Result<(), Full> {
        if first {
            self.aa = false;
        }
        // On the first step the cut is the query name or an ancestor of it:
        // its owner is a suffix of the question.
        let owner = if first {
            Owner::At((HEADER_LEN + lower.len() - cut.owner_wire().len()) as u16)
        } else {
            Owner::BelowApex(cut.owner_wire(), zone.origin().wire_len())
        };
        let ns = cut.rrset(RType::NS).expect("a cut has NS");
        let written = self.rrset(Section::Authority, owner, ns)?;
        self.note_additional(ns, written);
        // A signed parent proves the child's security with the signed DS
        // (RFC 4035 3.1.4.1), or its absence with NSEC or NSEC3 (RFC 5155
        // 7.2.7); an unsigned zone does no DNSSEC processing.
        if !self.dnssec {
            return Ok(());
        }
        match cut.rrset(RType::DS).filter(|ds| ds.has_sigs()) {
            Some(ds) => self
                .rrset(Section::Authority, written.next_owner(owner), ds)
                .map(|_| ()),
            None => self.prove(zone, lower, Denial::InsecureReferral { cut }),
        }
    }

    /// Writes a whole RRset (and its signatures when DO is set).
    fn rrset(&mut self, section: Section, owner: Owner, set: RRset) -> Result<Written, Full> {
        self.w.section(section);
        let written = set.encoded().write(&mut self.w, owner, self.apex_pos)?;
        if self.dnssec && set.has_sigs() {
            let owner = written.next_owner(owner);
            set.encoded_sigs()
                .write(&mut self.w, owner, self.apex_pos)?;
        }
        Ok(written)
    }

    /// Remembers the additional records that go with `set`, if any.
    fn note_additional(&mut self, set: RRset<'a>, written: Written) {
        if let Some(block) = set.additional() {
            self.additional = Some((block, written));
        }
    }

    /// The target addresses of the NS/MX/SRV RRset answered, with DO set
    /// each with its RRSIGs (glue has none). What does not fit is left
    /// out without setting TC, an address RRset and its RRSIGs together,
    /// except glue a referral needs.
    fn write_additional(&mut self) {
        if let Some((block, written)) = self.additional {
            self.w.section(Section::Additional);
            let written = match self.dnssec && block.has_sigs() {
                false => block.write(&mut self.w, &written),
                true => block.write_signed(&mut self.w, &written),
            };
            if written.is_err() {
                self.tc = true;
            }
        }
    }

    /// The answer did not fit: keep only the question, set TC.
    fn truncate(&mut self) {
        self.w.rollback(self.after_question);
        self.tc = true;
    }

    /// Inlined, like `new`: taking the Responder by value was a copy.
    #[inline(always)]
    fn finish(mut self) -> Summary {
        let mut flags = response_flags(self.q.header.flags) | (self.rcode.0 & 0xF);
        if self.aa {
            flags |= flags::AA;
        }
        if self.tc {
            flags |= flags::TC;
        }
        if self.q.edns.is_some() {
            let (size, rcode) = (self.config.max_udp_payload, self.rcode.0);
            self.w.set_limit(u16::MAX as usize);
            self.w.section(Section::Additional);
            let written = match self.not_authoritative {
                false => self
                    .w
                    .raw_record(&edns::opt_record(size, rcode, self.dnssec)),
                true => self
                    .w
                    .raw_record(&not_authoritative_opt(size, rcode, self.dnssec)),
            };
            written.expect("room was reserved");
        }
        self.w.finish(self.q.header.id, flags, 1);
        Summary {
            wildcard_at: self.wildcard_at,
            extended_rcode: self.rcode.0 > 0xF,
        }
    }
}

/// The OPT record of a REFUSED for a name in no zone: kept out of line,
/// off the path of every other answer.
#[cold]
#[inline(never)]
fn not_authoritative_opt(size: u16, rcode: u16, dnssec: bool) -> [u8; edns::OPT_WITH_ERROR_LEN] {
    edns::opt_record_with_error(size, rcode, dnssec, edns::ede::NOT_AUTHORITATIVE)
}

/// Where in `name` (an uncompressed wire name) `suffix` starts as its
/// last labels, compared without regard to ASCII case.
fn suffix_at(name: &[u8], suffix: &[u8]) -> Option<usize> {
    let mut at = 0;
    while at < name.len() && name.len() - at >= suffix.len() {
        if name.len() - at == suffix.len() {
            return name[at..].eq_ignore_ascii_case(suffix).then_some(at);
        }
        at += 1 + name[at] as usize;
    }
    None
}

/// How to write an owner: a pointer to where it already is, or its labels
/// down to the apex and a pointer to the apex.
fn owner_of<'n>(zone: &Zone, name: &'n [u8], at: Option<u16>) -> Owner<'n> {
    match at {
        Some(pos) => Owner::At(pos),
        None => Owner::BelowApex(name, zone.origin().wire_len()),
    }
}

/// Whether a lower-cased wire name is at or below the zone's origin.
fn in_zone(zone: &Zone, lower: &[u8]) -> bool {
    let origin = zone.origin().as_wire();
    lower.len() >= origin.len() && suffixes(lower).any(|s| s == origin)
}

/// Walks from the apex down to `lower` (lower-cased wire, in the zone),
/// whose labels start at `starts` (the whole name's first, the root's
/// last). `first_hash`, if known, is the zone's hash of the first name
/// looked up, the one just below the apex.
fn find<'z>(
    zone: &'z Zone,
    lower: &[u8],
    starts: &[u8],
    first_hash: Option<u64>,
    qtype: RType,
) -> Found<'z> {
    // starts[n-1] is the apex, starts[0] the name itself. The apex is
    // never a cut, and whether it redirects names below it the zone says:
    // its node is read only when the answer comes from it.
    let n = starts.len().saturating_sub(zone.origin_labels());
    if n > 1 && zone.apex_has_dname() {
        return Found::Dname(zone.apex());
    }
    let mut encloser = None;
    let mut hash = first_hash;
    for &off in starts[..n.saturating_sub(1)].iter().rev() {
        let off = off as usize;
        let name = &lower[off..];
        let hash = hash.take().unwrap_or_else(|| zone.hash(name));
        // An NSEC3 owner with no names below it is found as a name that
        // does not exist (RFC 5155 7.2.8), and so is every name below it;
        // one with names below it is an empty non-terminal (asked only of
        // NSEC3 owners: the children's table is not read otherwise).
        let hashed_only = |n: &Node| n.is_nsec3_only() && !zone.has_children(n.key());
        let Some(node) = zone.node_below_apex(name, hash).filter(|n| !hashed_only(n)) else {
            return wildcard(zone, encloser.unwrap_or_else(|| zone.apex()));
        };
        let exact = off == 0;
        if node.is_cut() && !(exact && qtype == RType::DS) {
            return Found::Referral(node);
        }
        if !exact && node.has_dname() {
            return Found::Dname(node);
        }
        encloser = Some(node);
    }
    Found::Exact(encloser.unwrap_or_else(|| zone.apex()))
}

/// The source of synthesis `*.<closest encloser>` (RFC 4592 3.3.1).
fn wildcard<'z>(zone: &'z Zone, encloser: Node<'z>) -> Found<'z> {
    if !zone.may_have_wildcards() {
        return Found::NxDomain(encloser);
    }
    let source = WildcardName::below(encloser.key()).and_then(|star| zone.node(star.as_wire()));
    match source {
        Some(node) => Found::Wildcard(node),
        None => Found::NxDomain(encloser),
    }
}

/// The CNAME target a DNAME synthesizes for `owner` (RFC 6672 2.2), or None
/// when the result would be longer than 255 octets.
fn dname_target(owner: &[u8], dname_node: Node, target: &[u8]) -> Option<NameBuf> {
    let keep = owner.len() - dname_node.owner_wire().len();
    let len = keep + target.len();
    if len > MAX_NAME_LEN {
        return None;
    }
    let mut buf = [0u8; MAX_NAME_LEN];
    buf[..keep].copy_from_slice(&owner[..keep]);
    buf[keep..len].copy_from_slice(target);
    let mut out = NameBuf::new();
    out.set(&buf[..len]);
    Some(out)
}
