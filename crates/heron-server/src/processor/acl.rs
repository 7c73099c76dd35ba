//! Layer 2: who may do what. Transfers need the zone's `allow-transfer`,
//! NOTIFY a zone we are secondary for and its `allow-notify`, queries the
//! zone's or the server's `allow-query` (a [`QueryPolicy`]; the UDP batch
//! path and [`Processor::process`] check plain queries with
//! [`Processor::screen`] before the engine, deferred ones are checked
//! here). The key checked is the one the TSIG record names; `tsig`
//! verifies it before the verdict is acted on. Blackholed addresses are
//! dropped before anything else, on every transport.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwapOption;

use heron_proto::message::Query;
use heron_proto::{Class, Name, Opcode, RType};
use heron_xfr::acl::{Acl, Denied, Prefix};
use heron_xfr::update::Requester;
use heron_zone::{Catalog, Served, Zone};

use super::{Processor, Refusal, Request, Transport};

/// The verdict on a deferred query.
pub(super) enum Admission {
    /// A query for the answer engine (it was deferred for its TSIG).
    Query,
    /// A transfer of this zone, allowed.
    Transfer(Arc<Zone>),
    /// A NOTIFY for this secondary zone (lower-cased origin), allowed.
    Notify(Name),
    /// An UPDATE of this zone (lower-cased origin) from a sender some
    /// `allow-update` rule is for; each change is checked later.
    Update(Name),
    /// An UPDATE of this secondary zone (lower-cased origin) from a
    /// sender its `allow-update-forwarding` allows: for its primary.
    Forward(Name),
    Refuse(Refusal),
}

pub(super) fn admit(p: &Processor, catalog: &Catalog, req: &Request, q: &Query) -> Admission {
    let key = claimed_key(req.bytes, q);
    let ip = req.peer.ip();
    if q.header.opcode() == Opcode::NOTIFY {
        let origin = q.qname_lower.to_name();
        // Secondary zones are of class IN: a NOTIFY of another class is
        // about no zone of ours (RFC 1996 3.2).
        if q.qclass != Class::IN || !p.secondaries.load().contains(&origin) {
            return Admission::Refuse(Refusal::NotSecondary);
        }
        return match p
            .primary
            .policy(&origin)
            .allow_notify
            .check(ip, key.as_ref())
        {
            Ok(()) => Admission::Notify(origin),
            Err(why) => Admission::Refuse(Refusal::NotifyDenied(why)),
        };
    }
    if q.header.opcode() == Opcode::UPDATE {
        return admit_update(p, catalog, ip, key.as_ref(), q);
    }
    if q.header.opcode() != Opcode::QUERY {
        // The engine's NOTIMP, with the opcode echoed (as NSD, Knot and
        // BIND): a transfer asked with another opcode is no transfer.
        return Admission::Query;
    }
    match q.qtype {
        RType::AXFR if req.transport == Transport::Udp => Admission::Refuse(Refusal::AxfrOverUdp),
        RType::AXFR | RType::IXFR => {
            let qname = q.qname_lower.to_name();
            let Some(zone) = catalog.get(&qname).filter(|z| z.class() == q.qclass) else {
                if !catalog.is_expired(q.qname_lower.as_wire()) {
                    return Admission::Refuse(Refusal::ZoneNotServed);
                }
                // Only those who may transfer it learn that it expired
                // (regression hunt AX-3; Knot refuses the others first).
                let policy = p.primary.policy(&qname);
                return match policy.allow_transfer.check(ip, key.as_ref()) {
                    Ok(()) => Admission::Refuse(Refusal::ZoneExpired),
                    Err(why) => Admission::Refuse(Refusal::TransferDenied(why)),
                };
            };
            let policy = p.primary.policy(zone.origin());
            match policy.allow_transfer.check(ip, key.as_ref()) {
                Ok(()) => Admission::Transfer(zone.clone()),
                Err(why) => Admission::Refuse(Refusal::TransferDenied(why)),
            }
        }
        _ => match &*p.query_policy.load() {
            Some(policy) => match policy.check_query(catalog, ip, key.as_ref(), q) {
                Ok(()) => Admission::Query,
                Err(why) => Admission::Refuse(Refusal::QueryDenied(why)),
            },
            None => Admission::Query,
        },
    }
}

/// An UPDATE: one whose zone section is not of type SOA is FORMERR (RFC
/// 2136 3.1.1, as Knot and BIND); one for a secondary zone is forwarded to its primary if
/// its `allow-update-forwarding` allows the sender (REFUSED if not, the
/// engine's NOTIMP if the list is empty); one for a zone we do not serve
/// is NOTAUTH (RFC 2136 3.1.2); a zone without `allow-update` answers as
/// before (the engine's NOTIMP);
/// a sender no rule is for is REFUSED before the message is read.
fn admit_update(
    p: &Processor,
    catalog: &Catalog,
    ip: IpAddr,
    key: Option<&Name>,
    q: &Query,
) -> Admission {
    if q.qtype != RType::SOA {
        return Admission::Refuse(Refusal::UpdateZoneNotSoa);
    }
    let origin = q.qname_lower.to_name();
    if p.secondaries.load().contains(&origin) {
        // RFC 2136 6: the primary decides; we only say who may ask it.
        let forwarding = &p.primary.policy(&origin).update.forwarding;
        return match forwarding.check(ip, key) {
            _ if forwarding.is_empty() => Admission::Query,
            Ok(()) => Admission::Forward(origin),
            Err(_) => Admission::Refuse(Refusal::UpdateDenied),
        };
    }
    let served = catalog.get(&origin).filter(|z| z.class() == q.qclass);
    if served.is_none() {
        return match catalog.is_expired(q.qname_lower.as_wire()) {
            true => Admission::Refuse(Refusal::UpdateZoneNotLoaded),
            false => Admission::Refuse(Refusal::UpdateNotServed),
        };
    }
    let policy = p.primary.policy(&origin);
    if !policy.takes_updates() {
        return Admission::Query;
    }
    match policy.update.policy.admits(Requester { ip, key }) {
        true => Admission::Update(origin),
        false => Admission::Refuse(Refusal::UpdateDenied),
    }
}

/// The key the request's TSIG record names, not yet verified.
fn claimed_key(bytes: &[u8], q: &Query) -> Option<Name> {
    let at = q.tsig.as_ref()?.start;
    Name::read(bytes, at).ok().map(|(name, _)| name)
}

/// The query policy of a running server, replaced whole by a reload
/// (before the zones it adds are served: a zone's `allow-query` holds
/// from its first answer). Queries in flight keep the one they loaded.
#[derive(Debug, Default)]
pub struct SharedQueryPolicy {
    /// Whether a policy is held: the fast path's one relaxed load. It is
    /// set before the catalog that needs it is stored, and a worker loads
    /// the catalog first, so a zone served with a list is screened.
    held: AtomicBool,
    policy: ArcSwapOption<QueryPolicy>,
}

impl SharedQueryPolicy {
    pub fn new(policy: QueryPolicy) -> Arc<SharedQueryPolicy> {
        let shared = Arc::new(SharedQueryPolicy::default());
        shared.replace(policy);
        shared
    }

    /// From now on, `policy` (an empty one is not held).
    pub fn replace(&self, policy: QueryPolicy) {
        let held = !policy.is_empty();
        self.policy.store(held.then(|| Arc::new(policy)));
        self.held.store(held, Ordering::Release);
    }

    /// Whether anything is configured.
    #[inline]
    pub fn held(&self) -> bool {
        self.held.load(Ordering::Relaxed)
    }

    /// The policy now, if any.
    pub fn load(&self) -> arc_swap::Guard<Option<Arc<QueryPolicy>>> {
        self.policy.load()
    }
}

/// Who may query, and who gets nothing at all (`[server] allow-query`,
/// `[[zone]] allow-query`, `[server] blackhole`). The processor holds
/// one only when something is configured, so the fast path pays a single
/// branch when nothing is; a reload replaces it ([`SharedQueryPolicy`]).
#[derive(Clone, Debug, Default)]
pub struct QueryPolicy {
    /// Prefixes whose queries are dropped on every transport.
    pub blackhole: Vec<Prefix>,
    /// Server-wide; a zone's own list takes its place for that zone.
    pub allow_query: Option<Acl>,
    /// Per zone, by lower-cased origin.
    pub zone_allow_query: HashMap<Name, Acl>,
}

impl QueryPolicy {
    /// Whether anything is configured (an empty policy is not held).
    pub fn is_empty(&self) -> bool {
        self.blackhole.is_empty() && self.allow_query.is_none() && self.zone_allow_query.is_empty()
    }

    /// Whether `ip` gets no answer at all. Blackhole lists are short, so
    /// a scan over the prefixes is the cheapest lookup.
    pub fn blackholes(&self, ip: IpAddr) -> bool {
        self.blackhole.iter().any(|p| p.contains(ip))
    }

    /// Whether a query for `q` from `ip`, signed by `key`, may be
    /// answered: the list of the zone its name is in, else the
    /// server-wide list, else yes.
    pub(super) fn check_query(
        &self,
        catalog: &Catalog,
        ip: IpAddr,
        key: Option<&Name>,
        q: &Query,
    ) -> Result<(), Denied> {
        let zone_acl = if self.zone_allow_query.is_empty() {
            None
        } else {
            // The zone the answer comes from: a DS at a child's apex is
            // the parent's data, and the parent's list judges it.
            let served = catalog.served_name(q.qname_lower.as_wire(), &q.qname_starts);
            match heron_zone::answer::for_question(catalog, q, served) {
                Served::Zone(zone) => self.zone_allow_query.get(zone.origin()),
                Served::Expired | Served::NotServed => None,
            }
        };
        match zone_acl.or(self.allow_query.as_ref()) {
            Some(acl) => acl.check(ip, key),
            None => Ok(()),
        }
    }
}
