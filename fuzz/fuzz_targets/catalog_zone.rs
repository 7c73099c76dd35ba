//! Any records as a catalog zone (RFC 9432): members or problems, never a
//! panic. The input is a list of records, each an owner (wire form), a
//! type and RDATA, read from the bytes; owners that do not parse end the
//! list.
#![no_main]

use heron_proto::{Name, RType};
use heron_xfr::catalog_zone::{diff, parse};
use libfuzzer_sys::fuzz_target;

/// Types the parser looks at, so that most inputs reach its rules.
const TYPES: [RType; 4] = [RType::TXT, RType::PTR, RType::A, RType::SOA];

fuzz_target!(|data: &[u8]| {
    let catalog = Name::parse("cat.test").unwrap();
    let mut records: Vec<(Name, RType, Vec<u8>)> = Vec::new();
    let mut rest = data;
    while let Some((&head, tail)) = rest.split_first() {
        let Ok((owner, used)) = Name::read_uncompressed(tail, 0) else {
            break;
        };
        let tail = &tail[used..];
        let len = (head >> 2) as usize % (tail.len() + 1);
        let (rdata, tail) = tail.split_at(len);
        // Half the owners go below the catalog, where its rules apply.
        let owner = match owner.replace_suffix(&Name::root(), &catalog) {
            Ok(below) if head & 0x80 != 0 => below,
            _ => owner,
        };
        records.push((owner, TYPES[(head & 3) as usize], rdata.to_vec()));
        rest = tail;
    }
    let parsed = parse(
        &catalog,
        records.iter().map(|(o, t, r)| (o, *t, r.as_slice())),
    );
    if let Ok(members) = parsed {
        // Members with a group report a kept file in use, the others no
        // template, so both kinds of problem print.
        let file_in_use =
            |m: &heron_xfr::catalog_zone::Member| m.group().map(|g| format!("{g}.zone"));
        for problem in
            heron_xfr::catalog_zone::check(&catalog, &members, |_| false, file_in_use, |_| false)
        {
            let _ = problem.to_string();
        }
        assert!(diff(&members, &members).is_empty());
    }
});
