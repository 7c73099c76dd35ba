//! Layer 5b: EDNS options a query asked for, appended to the OPT record
//! that ends its response, before `sign`: NSID (RFC 5001) when the
//! server has an identifier, EXPIRE (RFC 7314) on an SOA answer or the
//! first message of a transfer from a zone we serve. A query that asked
//! for neither pays one test of two flags the parser set.

use std::collections::HashMap;
use std::sync::RwLock;

use heron_proto::edns::OptionWriter;
use heron_proto::message::Query;
use heron_proto::{Name, RType};
use heron_zone::Catalog;

use super::{Processor, Request, Transport};

/// When each secondary zone expires (seconds since the Unix epoch),
/// counted from its last successful refresh: the secondary's driver
/// writes it, the processor reads it for EXPIRE (RFC 7314 4).
#[derive(Debug, Default)]
pub struct ExpiryDeadlines {
    by_origin: RwLock<HashMap<Name, u64>>,
}

impl ExpiryDeadlines {
    /// Records that the zone at `origin` expires at `deadline`.
    pub fn set(&self, origin: &Name, deadline: u64) {
        let mut map = self.by_origin.write().expect("not poisoned");
        map.insert(origin.to_lowercase(), deadline);
    }

    /// Forgets a zone no longer served.
    pub fn remove(&self, origin: &Name) {
        let mut map = self.by_origin.write().expect("not poisoned");
        map.remove(&origin.to_lowercase());
    }

    /// Seconds left at `now`; None for a zone with no deadline known.
    pub fn remaining(&self, origin: &Name, now: u64) -> Option<u32> {
        let map = self.by_origin.read().expect("not poisoned");
        let deadline = *map.get(origin)?;
        Some(deadline.saturating_sub(now).min(u64::from(u32::MAX)) as u32)
    }
}

/// Whether `q` asked for an option this layer may add.
#[inline]
pub(super) fn asked(q: &Query) -> bool {
    q.edns.is_some_and(|e| e.options.nsid || e.options.expire)
}

/// Appends what `q` asked for to `out`, which must end with the OPT
/// record the engine writes (a cookie may be in it already); keeps `reserve` octets of the client's size
/// free (for TSIG). An option that does not fit is left out.
pub(super) fn append(
    p: &Processor,
    catalog: &Catalog,
    req: &Request,
    q: &Query,
    reserve: usize,
    out: &mut Vec<u8>,
) {
    let Some(edns) = q.edns else { return };
    let limit = match req.transport {
        Transport::Udp => super::size::limit(&p.config, q),
        Transport::Tcp | Transport::Tls => u16::MAX as usize,
    };
    let Some(mut w) = OptionWriter::ending(out, limit.saturating_sub(reserve)) else {
        return;
    };
    if edns.options.nsid
        && let Some(id) = &p.nsid
    {
        let _ = w.nsid(id);
    }
    if edns.options.expire
        && let Some(seconds) = expire(p, catalog, req.now, q)
    {
        let _ = w.expire(seconds);
    }
}

/// The EXPIRE value for a query at a zone's apex for its SOA or a
/// transfer: the SOA's expire as primary, the time left as secondary.
fn expire(p: &Processor, catalog: &Catalog, now: u64, q: &Query) -> Option<u32> {
    if !matches!(q.qtype, RType::SOA | RType::AXFR | RType::IXFR) {
        return None;
    }
    let origin = q.qname_lower.to_name();
    let zone = catalog.get(&origin).filter(|z| z.class() == q.qclass)?;
    if p.secondaries.load().contains(&origin) {
        p.expiry.remaining(&origin, now)
    } else {
        Some(zone.soa_expire())
    }
}
