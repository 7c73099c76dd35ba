//! Any bytes as a journal file: the reader stops at the first damaged
//! entry or refuses the header, never panics or allocates beyond what the
//! file holds; and whatever it reads encodes back to the same octets.
//!
//! Input: one octet (bit 0: first set every entry's checksum to match its
//! body, so that inputs reach the entry decoder rather than all failing
//! their checksums), then the file.
#![no_main]

use heron_xfr::journal::file::{JournalReader, checksum, encode_entry, header};
use libfuzzer_sys::fuzz_target;

/// Magic and version, before the origin.
const FIXED_HEADER: usize = 10;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, file)) = data.split_first() else {
        return;
    };
    let mut file = file.to_vec();
    if mode & 1 == 1 {
        fix_checksums(&mut file);
    }
    let Ok(mut reader) = JournalReader::new(&file[..], file.len() as u64) else {
        return;
    };
    let steps: Vec<_> = (&mut reader).collect();
    let good = reader.good_len() as usize;
    assert!(good <= file.len());
    assert_eq!(reader.damage().is_none(), good == file.len());
    let mut again = header(reader.origin());
    for step in &steps {
        encode_entry(step, &mut again).expect("a step that was read encodes");
    }
    assert!(again == file[..good], "read back differently");
});

/// Walks the entries by their lengths and sets each checksum.
fn fix_checksums(file: &mut [u8]) {
    let Some(mut at) = header_len(file) else {
        return;
    };
    while let Some(head) = file.get(at..at + 8) {
        let len = u32::from_be_bytes(head[..4].try_into().unwrap()) as usize;
        let Some(body) = file.get(at + 8..).and_then(|rest| rest.get(..len)) else {
            return;
        };
        let crc = checksum(body);
        file[at + 4..at + 8].copy_from_slice(&crc.to_be_bytes());
        at += 8 + len;
    }
}

/// Where the origin in the header ends, if it does.
fn header_len(file: &[u8]) -> Option<usize> {
    let mut at = FIXED_HEADER;
    while at <= FIXED_HEADER + 255 {
        let label = *file.get(at)? as usize;
        at += 1 + label;
        if label == 0 {
            return Some(at);
        }
    }
    None
}
