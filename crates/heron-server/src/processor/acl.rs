//! Layer 2: who may do what. Transfers need the zone's `allow-transfer`,
//! NOTIFY a zone we are secondary for and its `allow-notify`; plain
//! queries pass (query ACLs come with issue 25). The key checked is the
//! one the TSIG record names; `tsig` verifies it before the verdict is
//! acted on.

use std::sync::Arc;

use heron_proto::message::Query;
use heron_proto::{Name, Opcode, RType};
use heron_zone::{Catalog, Zone};

use super::{Processor, Refusal, Request, Transport};

/// The verdict on a deferred query.
pub(super) enum Admission {
    /// A query for the answer engine (it was deferred for its TSIG).
    Query,
    /// A transfer of this zone, allowed.
    Transfer(Arc<Zone>),
    /// A NOTIFY for this secondary zone (lower-cased origin), allowed.
    Notify(Name),
    Refuse(Refusal),
}

pub(super) fn admit(p: &Processor, catalog: &Catalog, req: &Request, q: &Query) -> Admission {
    let key = claimed_key(req.bytes, q);
    let ip = req.peer.ip();
    if q.header.opcode() == Opcode::NOTIFY {
        let origin = q.qname_lower.to_name();
        if !p.secondaries.contains(&origin) {
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
    match q.qtype {
        RType::AXFR if req.transport == Transport::Udp => Admission::Refuse(Refusal::AxfrOverUdp),
        RType::AXFR | RType::IXFR => {
            let qname = q.qname_lower.to_name();
            let Some(zone) = catalog.get(&qname).filter(|z| z.class() == q.qclass) else {
                return Admission::Refuse(Refusal::ZoneNotServed);
            };
            let policy = p.primary.policy(zone.origin());
            match policy.allow_transfer.check(ip, key.as_ref()) {
                Ok(()) => Admission::Transfer(zone.clone()),
                Err(why) => Admission::Refuse(Refusal::TransferDenied(why)),
            }
        }
        _ => Admission::Query,
    }
}

/// The key the request's TSIG record names, not yet verified.
fn claimed_key(bytes: &[u8], q: &Query) -> Option<Name> {
    let at = q.tsig.as_ref()?.start;
    Name::read(bytes, at).ok().map(|(name, _)| name)
}
