//! An UPDATE message read into its sections (RFC 2136 2 and 3.1-3.4.1):
//! the zone, the prerequisites and the changes, each checked for the form
//! the RFC allows (classes, TTLs, RDATA lengths, meta types) so that the
//! later steps meet only well-formed requests.

use heron_proto::message::{HEADER_LEN, Header};
use heron_proto::name::NameBuf;
use heron_proto::{Class, Name, Opcode, RType, Rcode, rdata};

/// One prerequisite (RFC 2136 2.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prerequisite {
    /// 2.4.1: an RRset of this type exists, whatever its records.
    RrsetExists(Name, RType),
    /// 2.4.2: the RRset exists with exactly these records (one per
    /// prerequisite record; they are gathered per owner and type).
    RrsetEquals(Name, RType, Vec<u8>),
    /// 2.4.3: no RRset of this type exists.
    RrsetAbsent(Name, RType),
    /// 2.4.4: the name owns at least one record.
    NameInUse(Name),
    /// 2.4.5: the name owns no record.
    NameNotInUse(Name),
}

/// One change of the update section (RFC 2136 2.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// 2.5.1: add a record to an RRset.
    Add {
        owner: Name,
        rtype: RType,
        ttl: u32,
        rdata: Vec<u8>,
    },
    /// 2.5.2: delete an RRset.
    DeleteRrset(Name, RType),
    /// 2.5.3: delete every RRset of a name.
    DeleteName(Name),
    /// 2.5.4: delete one record.
    DeleteRecord(Name, RType, Vec<u8>),
}

impl Change {
    pub fn owner(&self) -> &Name {
        match self {
            Change::Add { owner, .. } => owner,
            Change::DeleteRrset(owner, _)
            | Change::DeleteName(owner)
            | Change::DeleteRecord(owner, _, _) => owner,
        }
    }

    /// The type changed; ANY for a whole name.
    pub fn rtype(&self) -> RType {
        match self {
            Change::Add { rtype, .. } => *rtype,
            Change::DeleteRrset(_, t) | Change::DeleteRecord(_, t, _) => *t,
            Change::DeleteName(_) => RType::ANY,
        }
    }
}

/// An UPDATE request, its sections read and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateMessage {
    pub id: u16,
    /// The zone section's name, as sent.
    pub zone: Name,
    pub class: Class,
    pub prerequisites: Vec<Prerequisite>,
    pub changes: Vec<Change>,
}

/// Why an UPDATE was not read: its answer code, and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    pub rcode: Rcode,
    pub why: String,
}

pub(crate) fn reject(rcode: Rcode, why: impl Into<String>) -> Rejected {
    Rejected {
        rcode,
        why: why.into(),
    }
}

fn formerr(why: impl Into<String>) -> Rejected {
    reject(Rcode::FORMERR, why)
}

/// A record of the prerequisite or update section, as sent.
struct Raw {
    owner: Name,
    rtype: RType,
    class: Class,
    ttl: u32,
    rdata: Vec<u8>,
}

/// Reads an UPDATE message (TSIG and OPT in the additional section are
/// the caller's, verified before). FORMERR for what RFC 2136 3.1.1,
/// 3.2.1 and 3.4.1.3 call malformed, NOTZONE for a name outside the zone.
pub fn parse(msg: &[u8]) -> Result<UpdateMessage, Rejected> {
    let header = Header::read(msg).ok_or_else(|| formerr("shorter than a header"))?;
    if header.opcode() != Opcode::UPDATE {
        return Err(formerr("not an UPDATE"));
    }
    if header.qdcount != 1 {
        return Err(formerr(format!(
            "{} zones in the zone section",
            header.qdcount
        )));
    }
    let (zone, end) = Name::read(msg, HEADER_LEN).map_err(|e| formerr(format!("zone: {e}")))?;
    let fixed = msg
        .get(end..end + 4)
        .ok_or_else(|| formerr("zone section cut short"))?;
    let (ztype, class) = (
        RType(u16::from_be_bytes([fixed[0], fixed[1]])),
        Class(u16::from_be_bytes([fixed[2], fixed[3]])),
    );
    if ztype != RType::SOA {
        return Err(formerr(format!("zone section type {ztype}, not SOA")));
    }
    if class == Class::ANY || class == Class::NONE {
        return Err(formerr(format!("zone class {class}")));
    }
    let mut pos = end + 4;
    let mut read = |count: u16| -> Result<Vec<Raw>, Rejected> {
        let mut records = Vec::with_capacity(count.min(256) as usize);
        for _ in 0..count {
            let (raw, next) = read_record(msg, pos)?;
            records.push(raw);
            pos = next;
        }
        Ok(records)
    };
    let prereq_records = read(header.ancount)?;
    let update_records = read(header.nscount)?;
    let mut message = UpdateMessage {
        id: header.id,
        zone,
        class,
        prerequisites: Vec::with_capacity(prereq_records.len()),
        changes: Vec::with_capacity(update_records.len()),
    };
    for raw in prereq_records {
        let p = prerequisite(raw, &message.zone, class)?;
        message.prerequisites.push(p);
    }
    for raw in update_records {
        let c = change(raw, &message.zone, class)?;
        message.changes.push(c);
    }
    Ok(message)
}

/// One record at `pos`, RDATA decompressed and checked for its type
/// (empty RDATA is allowed: deletions and prerequisites carry none).
fn read_record(msg: &[u8], pos: usize) -> Result<(Raw, usize), Rejected> {
    let mut name = NameBuf::new();
    let pos = name
        .read_compressed(msg, pos)
        .map_err(|e| formerr(format!("record owner: {e}")))?;
    let f = msg
        .get(pos..pos + 10)
        .ok_or_else(|| formerr("record cut short"))?;
    let rtype = RType(u16::from_be_bytes([f[0], f[1]]));
    let class = Class(u16::from_be_bytes([f[2], f[3]]));
    let ttl = u32::from_be_bytes([f[4], f[5], f[6], f[7]]);
    let len = u16::from_be_bytes([f[8], f[9]]) as usize;
    let start = pos + 10;
    if start + len > msg.len() {
        return Err(formerr("RDATA runs past the end of the message"));
    }
    let mut rdata = Vec::with_capacity(len);
    if len > 0 && !rtype.is_meta() {
        rdata::read_wire(rtype, msg, start, len, &mut rdata)
            .map_err(|e| formerr(format!("{} {rtype}: {}", name.to_name(), e.0)))?;
    } else {
        rdata.extend_from_slice(&msg[start..start + len]);
    }
    let raw = Raw {
        owner: name.to_name(),
        rtype,
        class,
        ttl,
        rdata,
    };
    Ok((raw, start + len))
}

fn in_zone(owner: &Name, zone: &Name) -> Result<(), Rejected> {
    match owner.is_subdomain_of(zone) {
        true => Ok(()),
        false => Err(reject(
            Rcode::NOTZONE,
            format!("{owner} is outside the zone {zone}"),
        )),
    }
}

/// A prerequisite record (RFC 2136 3.2.1 and 3.2.4's table).
fn prerequisite(raw: Raw, zone: &Name, zclass: Class) -> Result<Prerequisite, Rejected> {
    let Raw {
        owner,
        rtype,
        class,
        ttl,
        rdata,
    } = raw;
    if ttl != 0 {
        return Err(formerr(format!("prerequisite {owner} {rtype}: TTL {ttl}")));
    }
    let no_rdata = |what: Prerequisite| match rdata.is_empty() {
        true => Ok(what),
        false => Err(formerr(format!("prerequisite {owner} {rtype}: RDATA"))),
    };
    let p = match class {
        Class::ANY if rtype == RType::ANY => no_rdata(Prerequisite::NameInUse(owner.clone()))?,
        Class::NONE if rtype == RType::ANY => no_rdata(Prerequisite::NameNotInUse(owner.clone()))?,
        _ if rtype.is_meta() => {
            return Err(formerr(format!("prerequisite {owner}: type {rtype}")));
        }
        Class::ANY => no_rdata(Prerequisite::RrsetExists(owner.clone(), rtype))?,
        Class::NONE => no_rdata(Prerequisite::RrsetAbsent(owner.clone(), rtype))?,
        c if c == zclass => Prerequisite::RrsetEquals(owner.clone(), rtype, rdata),
        c => return Err(formerr(format!("prerequisite {owner} {rtype}: class {c}"))),
    };
    in_zone(&owner, zone)?;
    Ok(p)
}

/// An update record (RFC 2136 3.4.1.3 and 2.5's forms).
fn change(raw: Raw, zone: &Name, zclass: Class) -> Result<Change, Rejected> {
    let Raw {
        owner,
        rtype,
        class,
        ttl,
        rdata,
    } = raw;
    in_zone(&owner, zone)?;
    let c = match class {
        c if c == zclass => {
            // Type 0 is reserved (RFC 6895 3.1): no record has it.
            if rtype.is_meta() || rtype.0 == 0 {
                return Err(formerr(format!("update {owner}: type {rtype}")));
            }
            if rdata.is_empty() && !accepts_empty_rdata(rtype) {
                return Err(formerr(format!("update {owner} {rtype}: no RDATA")));
            }
            Change::Add {
                owner,
                rtype,
                // RFC 2181 8: a TTL with its top bit set is taken as zero,
                // as a transfer's is; zone files cannot hold it.
                ttl: if ttl > MAX_TTL { 0 } else { ttl },
                rdata,
            }
        }
        Class::ANY => {
            if ttl != 0 || !rdata.is_empty() {
                return Err(formerr(format!("delete {owner} {rtype}: TTL or RDATA")));
            }
            match rtype {
                RType::ANY => Change::DeleteName(owner),
                t if t.is_meta() => return Err(formerr(format!("delete {owner}: type {t}"))),
                t => Change::DeleteRrset(owner, t),
            }
        }
        Class::NONE => {
            if ttl != 0 || rtype.is_meta() {
                return Err(formerr(format!("delete {owner} {rtype}: TTL or type")));
            }
            Change::DeleteRecord(owner, rtype, rdata)
        }
        c => return Err(formerr(format!("update {owner} {rtype}: class {c}"))),
    };
    Ok(c)
}

/// The largest TTL (RFC 2181 8).
const MAX_TTL: u32 = i32::MAX as u32;

/// Types whose RDATA may be empty (RFC 3597 types with no fields, NULL).
fn accepts_empty_rdata(rtype: RType) -> bool {
    let mut out = Vec::new();
    rdata::read_wire(rtype, &[], 0, 0, &mut out).is_ok()
}
