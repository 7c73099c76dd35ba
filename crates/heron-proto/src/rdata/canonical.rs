//! The canonical form of RDATA for DNSSEC (RFC 4034 6.2, as corrected by
//! RFC 6840 5.1): names in the RDATA of the types listed there are
//! lower-cased; NSEC's next name is not, and every other type is as is.

use std::borrow::Cow;

use super::field;
use super::schema::{self, Field};
use super::wire::Wire;
use crate::types::RType;

/// Whether RFC 4034 6.2 (less NSEC, RFC 6840 5.1) lower-cases the names in
/// this type's RDATA. NXT and A6 are listed too, but Heron only holds
/// them as opaque RDATA.
pub fn lowercases_names(rtype: RType) -> bool {
    matches!(
        rtype,
        RType::NS
            | RType::MD
            | RType::MF
            | RType::CNAME
            | RType::SOA
            | RType::MB
            | RType::MG
            | RType::MR
            | RType::PTR
            | RType::MINFO
            | RType::MX
            | RType::RP
            | RType::AFSDB
            | RType::RT
            | RType::NAPTR
            | RType::KX
            | RType::SRV
            | RType::DNAME
            | RType::RRSIG
            | RType::SIG
            | RType::PX
    )
}

/// `rdata` (uncompressed wire form) in canonical form: borrowed when it
/// already is, or when it does not parse as its type (then it is signed as
/// it is stored, which is what a validator reading it back would hash).
pub fn canonical_rdata(rtype: RType, rdata: &[u8]) -> Cow<'_, [u8]> {
    if !lowercases_names(rtype) {
        return Cow::Borrowed(rdata);
    }
    let Some(fields) = schema::fields(rtype) else {
        return Cow::Borrowed(rdata);
    };
    let mut w = Wire::new(rdata, 0);
    let mut names = [(0usize, 0usize); 2];
    let mut count = 0;
    for &f in fields {
        let start = w.pos;
        let Ok(bytes) = field::read(f, &mut w) else {
            return Cow::Borrowed(rdata);
        };
        if matches!(f, Field::DomainName(_)) && count < names.len() {
            names[count] = (start, start + bytes.len());
            count += 1;
        }
    }
    let upper = |&(s, e): &(usize, usize)| rdata[s..e].iter().any(u8::is_ascii_uppercase);
    if !names[..count].iter().any(upper) {
        return Cow::Borrowed(rdata);
    }
    let mut out = rdata.to_vec();
    for &(s, e) in &names[..count] {
        out[s..e].make_ascii_lowercase();
    }
    Cow::Owned(out)
}

/// Whether two RDATAs of `rtype` are the same record: equal in canonical
/// form, so that the names in them (and nothing else: a preference, a
/// port, a serial) compare without case (RFC 4034 6.2 and 6.3, RFC 4343).
pub fn rdata_equal(rtype: RType, a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    // Case never changes a name's length. Canonical forms that are equal
    // are equal without case throughout: that test, which allocates
    // nothing, settles almost every pair (the NS records of one
    // delegation, compared when a zone is built).
    a.len() == b.len()
        && lowercases_names(rtype)
        && a.eq_ignore_ascii_case(b)
        && canonical_rdata(rtype, a) == canonical_rdata(rtype, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::name::Name;

    fn wire(name: &str) -> Vec<u8> {
        Name::parse(name).unwrap().as_wire().to_vec()
    }

    #[test]
    fn names_of_listed_types_are_lowercased() {
        let mx = [&[0u8, 10][..], &wire("Mail.Example.")].concat();
        assert_eq!(
            canonical_rdata(RType::MX, &mx).as_ref(),
            [&[0u8, 10][..], &wire("mail.example.")].concat()
        );
        let soa = [
            wire("NS1.Example."),
            wire("Host.Master."),
            vec![0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5],
        ]
        .concat();
        let lower = canonical_rdata(RType::SOA, &soa);
        assert_eq!(&lower[..13], &wire("ns1.example.")[..]);
        assert_eq!(&lower[13..26], &wire("host.master.")[..]);
        assert_eq!(&lower[26..], &soa[26..], "numbers untouched");
    }

    /// Only the names compare without case: an MX preference of 65 ('A')
    /// is not one of 97 ('a'), nor an SRV port or an SOA serial.
    #[test]
    fn records_equal_in_their_names_case_alone() {
        let mx = |pref: u16, name: &str| [&pref.to_be_bytes()[..], &wire(name)].concat();
        assert!(rdata_equal(
            RType::MX,
            &mx(10, "Mail.Example."),
            &mx(10, "mail.example.")
        ));
        assert!(!rdata_equal(RType::MX, &mx(65, "a."), &mx(97, "a.")));
        let srv = |port: u16| [&[0, 0, 0, 0][..], &port.to_be_bytes(), &wire("t.")].concat();
        assert!(!rdata_equal(RType::SRV, &srv(80), &srv(112)));
        let soa =
            |serial: u8| [wire("a."), wire("b."), vec![0, 0, 0, serial], vec![0; 16]].concat();
        assert!(!rdata_equal(RType::SOA, &soa(0x41), &soa(0x61)));
        let txt = b"\x05HeLLo".to_vec();
        assert!(!rdata_equal(RType::TXT, &txt, b"\x05hello"));
        let nsec = |next: &str| [wire(next), vec![0, 1, 0x40]].concat();
        assert!(!rdata_equal(
            RType::NSEC,
            &nsec("A.example."),
            &nsec("a.example.")
        ));
    }

    #[test]
    fn other_types_and_nsec_keep_their_case() {
        let nsec = [wire("Next.Example."), vec![0, 1, 0x40]].concat();
        assert!(matches!(
            canonical_rdata(RType::NSEC, &nsec),
            Cow::Borrowed(_)
        ));
        let txt = b"\x05HeLLo".to_vec();
        assert_eq!(canonical_rdata(RType::TXT, &txt).as_ref(), &txt[..]);
        let lower = wire("a.example.");
        assert!(matches!(
            canonical_rdata(RType::NS, &lower),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn malformed_rdata_is_left_as_it_is() {
        for bad in [&b""[..], b"\x05Ab", b"\x00\x0a\x03MX"] {
            assert_eq!(canonical_rdata(RType::MX, bad).as_ref(), bad);
        }
    }
}
