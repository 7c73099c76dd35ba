//! Any text as a zone file: errors, never panics; loops in $INCLUDE and huge
//! $GENERATE ranges are bounded.
#![no_main]

use std::path::Path;

use heron_proto::Name;
use heron_zone::zonefile::{ReadOptions, read_str};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut opts = ReadOptions::new(Name::parse("fuzz.test").unwrap());
    opts.max_generate = 1000;
    // $INCLUDE paths resolve under a folder that does not exist.
    let base = Path::new("/nonexistent-heron-fuzz");
    let mut records = 0usize;
    let _ = read_str(text, Path::new("fuzz.zone"), base, &opts, &mut |_| {
        records += 1
    });
});
