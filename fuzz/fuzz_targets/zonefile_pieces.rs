//! Any text as a zone file, read whole and read in pieces (as a large
//! file is, one piece per core): whenever the whole reads without errors
//! and the pieces are read, they give the same records, on the same lines.
#![no_main]

use std::path::Path;

use heron_proto::Name;
use heron_zone::zonefile::{ReadOptions, Record, read_file_text, read_text_in_pieces};
use libfuzzer_sys::fuzz_target;

fn shown(records: &[Record]) -> Vec<String> {
    let show = |r: &Record| {
        let (owner, line) = (&r.owner, r.location.line);
        format!("{owner} {} {} {:?} {line}", r.ttl, r.rtype, r.rdata)
    };
    records.iter().map(show).collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&pieces, text)) = data.split_first() else {
        return;
    };
    let mut opts = ReadOptions::new(Name::parse("fuzz.test").unwrap());
    opts.max_generate = 1000;
    // $INCLUDE is never cut; its paths resolve under a missing folder.
    let path = Path::new("/nonexistent-heron-fuzz/fuzz.zone");
    let mut whole = Vec::new();
    if !read_file_text(text, path, &opts, &mut |r| whole.push(r.clone())).is_empty() {
        return;
    }
    let pieces = 2 + usize::from(pieces % 6);
    if let Some(read) = read_text_in_pieces(text, path, &opts, pieces) {
        assert_eq!(shown(&read), shown(&whole));
    }
});
