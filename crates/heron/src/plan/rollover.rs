//! What the rollover driver (`runtime::rollover`) decides, without I/O:
//! whether a signed zone's keys move at `now` (then it is signed again),
//! when they move next, what the parent must do; the DS query sent to a
//! parent server and what its answer says.

use heron_dnssec::ds::seen_at_every_server;
use heron_dnssec::rollover::state_file::ZoneKeys;
use heron_dnssec::rollover::waits::effective_policy;
use heron_dnssec::rollover::{ParentWait, Policy, Rollover, UnixTime};
use heron_proto::message::{Header, Message};
use heron_proto::{Name, RType};

/// What a zone's keys do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outlook {
    /// A record moves, or a key is due, at `now`: the zone is signed again.
    pub due_now: bool,
    /// When a record moves next by time alone.
    pub next: Option<UnixTime>,
    /// Set while a step waits for the parent's DS RRset.
    pub parent: Option<ParentWait>,
}

/// The zone's keys as recorded, looked at under `policy` at `now`
/// (nothing is written: the signing moves them for real).
pub fn outlook(state: &ZoneKeys, policy: Policy, now: UnixTime) -> Outlook {
    let mut machine = Rollover::new(policy, state.keys.clone());
    let plan = machine.advance(now);
    let moved = machine.keys() != state.keys.as_slice();
    Outlook {
        due_now: moved || !plan.generate.is_empty(),
        next: plan.next_check,
        parent: plan.parent,
    }
}

/// The policy a zone's keys run under at `now`: the configured one, with
/// the zone's largest TTL as the last signing served it, and any wait
/// lowered since still at its old value while the state file holds it
/// (as the signing's step computes it).
pub fn current_policy(
    configured: &heron_dnssec::policy::Policy,
    state: &ZoneKeys,
    now: UnixTime,
) -> Policy {
    let served = (state.waits.map(|w| w.last.max_zone_ttl))
        .or(state.policy.as_ref().map(|p| p.max_zone_ttl))
        .unwrap_or(0);
    let policy = configured.rollover_policy(u32::try_from(served).unwrap_or(u32::MAX));
    effective_policy(policy, state.waits, state.policy.as_ref(), now).0
}

/// A DS query for `zone`, without recursion desired, with EDNS (1232
/// octets): what a parent's DS RRset needs.
pub fn ds_query(zone: &Name, id: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + zone.as_wire().len() + 4 + 11);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 1]);
    out.extend_from_slice(zone.as_wire());
    out.extend_from_slice(&RType::DS.0.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    // OPT: root owner, type 41, 1232 octets, no extended flags or options.
    out.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0]);
    out
}

/// The DS RDATA a parent server's answer to [`ds_query`] holds; an
/// error for anything but an authoritative, complete answer to it
/// (NOERROR; none for NODATA).
pub fn ds_in_answer(answer: &[u8], zone: &Name, id: u16) -> Result<Vec<Vec<u8>>, String> {
    const QR: u16 = 0x8000;
    const AA: u16 = 0x0400;
    const TC: u16 = 0x0200;
    let header = Header::read(answer).ok_or("an answer shorter than a header")?;
    if header.id != id || !header.has(QR) {
        return Err("an answer to another query".into());
    }
    let message = Message::parse(answer).map_err(|e| format!("a malformed answer: {e:?}"))?;
    let asked = message.questions.first();
    if !asked.is_some_and(|q| q.name == *zone && q.qtype == RType::DS) {
        return Err("an answer to another question".into());
    }
    if header.has(TC) {
        return Err("a truncated answer".into());
    }
    let rcode = message.rcode();
    if rcode.0 != 0 {
        return Err(format!("answered {rcode}"));
    }
    if !header.has(AA) {
        return Err("not authoritative for the parent zone (a referral?)".into());
    }
    // A server of the zone itself answers a DS query at its apex from the
    // zone (NODATA, its own SOA): it is no parent server.
    let own_soa = (message.authority.iter()).any(|r| r.rtype == RType::SOA && r.name == *zone);
    if message.answers.is_empty() && own_soa {
        return Err(format!(
            "answers for {zone} itself, not for its parent (it serves the zone but not the parent)"
        ));
    }
    Ok((message.answers.iter())
        .filter(|r| r.rtype == RType::DS && r.name == *zone)
        .map(|r| r.rdata.clone())
        .collect())
}

/// What the parent servers' DS RRsets (one answer per server, every
/// server answered) say of the zone's keys (`dnskeys`: their DNSKEY
/// RDATA), for `Event::ParentDs`: the keys whose DS every server has, and
/// the keys being withdrawn (`removing`) whose DS any server still has —
/// so a DS counts as gone only once no server publishes it.
pub fn keys_at_parent(
    zone: &Name,
    dnskeys: &[Vec<u8>],
    removing: &[(u16, u8)],
    answers: &[Vec<Vec<u8>>],
) -> Vec<(u16, u8)> {
    let mut present = seen_at_every_server(zone, dnskeys, answers);
    for server in answers {
        for key in seen_at_every_server(zone, dnskeys, std::slice::from_ref(server)) {
            if removing.contains(&key) && !present.contains(&key) {
                present.push(key);
            }
        }
    }
    present
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_dnssec::dnskey::rdata;
    use heron_dnssec::ds::{DigestType, ds_rdata};
    use heron_dnssec::rollover::{Key, KskMethod};

    fn name(text: &str) -> Name {
        Name::parse(text).unwrap()
    }

    fn policy() -> Policy {
        Policy {
            algorithm: 13,
            csk: false,
            ksk_lifetime: 0,
            zsk_lifetime: 100,
            csk_lifetime: 0,
            ksk_method: KskMethod::DoubleSignature,
            propagation_delay: 1,
            dnskey_ttl: 2,
            max_zone_ttl: 2,
            signature_validity: 3600,
            parent_ds_ttl: 2,
            parent_propagation_delay: 1,
            retire_safety: 1,
            insecure: false,
        }
    }

    #[test]
    fn an_empty_zone_is_due_for_its_first_keys() {
        let state = ZoneKeys::new("z.", Vec::new());
        let seen = outlook(&state, policy(), 1000);
        assert!(seen.due_now);
    }

    #[test]
    fn keys_that_settled_wait_for_their_next_time() {
        let mut machine = Rollover::new(policy(), Vec::new());
        let mut tag = 0;
        let generate = |request: heron_dnssec::rollover::KeyRequest| {
            tag += 1;
            Ok::<_, ()>(Key::new(format!("k{tag}"), tag, 13, request.role, 1000))
        };
        let plan = machine.advance_generating(1000, generate).unwrap();
        let state = ZoneKeys::new("z.", machine.keys().to_vec());
        let seen = outlook(&state, policy(), 1000);
        assert!(!seen.due_now, "nothing moves again at the same second");
        assert_eq!(seen.next, plan.next_check);
        let at = seen.next.unwrap();
        assert!(outlook(&state, policy(), at).due_now);
        assert!(!outlook(&state, policy(), at - 1).due_now);
    }

    #[test]
    fn the_ds_query_reads_as_one() {
        let query = ds_query(&name("child.test."), 77);
        let parsed = heron_proto::message::parse_query(&query).unwrap();
        assert_eq!(parsed.qtype, RType::DS);
        assert!(parsed.edns.is_some());
    }

    /// An answer as a parent server sends it: header flags, question, DS.
    fn answer(id: u16, flags: u16, qname: &str, ds: &[Vec<u8>]) -> Vec<u8> {
        let zone = name(qname);
        let mut out = id.to_be_bytes().to_vec();
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(&[0, 1]);
        out.extend_from_slice(&(ds.len() as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(zone.as_wire());
        out.extend_from_slice(&[0, 43, 0, 1]);
        for rdata in ds {
            out.extend_from_slice(&[0xC0, 12, 0, 43, 0, 1, 0, 0, 0, 60]);
            out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
            out.extend_from_slice(rdata);
        }
        out
    }

    /// `answer` with an SOA of `owner` in its authority section.
    fn with_soa(mut answer: Vec<u8>, owner: &str) -> Vec<u8> {
        answer[9] = 1;
        answer.extend_from_slice(name(owner).as_wire());
        let rdata = [&[0u8][..], &[0], &[0; 20]].concat();
        answer.extend_from_slice(&[0, 6, 0, 1, 0, 0, 0, 60, 0, rdata.len() as u8]);
        answer.extend_from_slice(&rdata);
        answer
    }

    #[test]
    fn only_an_authoritative_complete_answer_counts() {
        let zone = name("child.test.");
        let key = rdata(257, 13, &[5; 64]);
        let ds = ds_rdata(&zone, &key, DigestType::Sha256).unwrap();
        let good = answer(9, 0x8400, "child.test.", std::slice::from_ref(&ds));
        assert_eq!(ds_in_answer(&good, &zone, 9).unwrap(), vec![ds.clone()]);
        let nodata = answer(9, 0x8400, "child.test.", &[]);
        assert!(ds_in_answer(&nodata, &zone, 9).unwrap().is_empty());
        let from_child = with_soa(nodata.clone(), "child.test.");
        let said = ds_in_answer(&from_child, &zone, 9).unwrap_err();
        assert!(said.contains("itself, not for its parent"), "{said}");
        let from_parent = with_soa(nodata, "test.");
        assert!(ds_in_answer(&from_parent, &zone, 9).unwrap().is_empty());
        for (bad, why) in [
            (answer(8, 0x8400, "child.test.", &[]), "another query"),
            (answer(9, 0x0400, "child.test.", &[]), "another query"),
            (answer(9, 0x8000, "child.test.", &[]), "not authoritative"),
            (answer(9, 0x8600, "child.test.", &[]), "truncated"),
            (answer(9, 0x8403, "child.test.", &[]), "answered"),
            (answer(9, 0x8400, "other.test.", &[]), "another question"),
        ] {
            let said = ds_in_answer(&bad, &zone, 9).unwrap_err();
            assert!(said.contains(why), "{said}");
        }
    }

    /// Truncations and byte flips of an answer never panic.
    #[test]
    fn mutated_answers_never_panic() {
        let zone = name("child.test.");
        let ds = ds_rdata(&zone, &rdata(257, 13, &[5; 64]), DigestType::Sha256).unwrap();
        let good = answer(9, 0x8400, "child.test.", &[ds.clone(), ds]);
        let mut seed: u32 = 0x1234_5678;
        for round in 0..5000 {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            let mut bytes = good.clone();
            if round % 2 == 0 {
                bytes.truncate(seed as usize % good.len());
            } else {
                let at = seed as usize % bytes.len();
                bytes[at] = (seed >> 8) as u8;
            }
            let _ = ds_in_answer(&bytes, &zone, 9);
        }
    }

    #[test]
    fn a_ds_is_gone_only_when_no_server_has_it() {
        let zone = name("child.test.");
        let old = rdata(257, 13, &[1; 64]);
        let new = rdata(257, 13, &[2; 64]);
        let ds = |k: &[u8]| ds_rdata(&zone, k, DigestType::Sha256).unwrap();
        let tag = |k: &[u8]| (heron_dnssec::dnskey::key_tag(k), 13);
        let keys = vec![old.clone(), new.clone()];
        // One server still has the old DS: it is not gone yet, and the
        // new one is seen only where every server has it.
        let answers = vec![vec![ds(&new)], vec![ds(&new), ds(&old)]];
        let at = keys_at_parent(&zone, &keys, &[tag(&old)], &answers);
        assert_eq!(at, vec![tag(&new), tag(&old)]);
        let answers = vec![vec![ds(&new)], vec![ds(&new)]];
        assert_eq!(
            keys_at_parent(&zone, &keys, &[tag(&old)], &answers),
            vec![tag(&new)]
        );
        let lagging = vec![vec![ds(&old)], vec![ds(&new), ds(&old)]];
        assert_eq!(keys_at_parent(&zone, &keys, &[], &lagging), vec![tag(&old)]);
    }
}
