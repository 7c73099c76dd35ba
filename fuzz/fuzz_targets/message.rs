//! Any bytes as a DNS message: the readers must reject or accept, never panic,
//! and whatever they accept must print.
#![no_main]

use heron_proto::message::{Message, parse_query};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_query(data);
    if let Ok(msg) = Message::parse(data) {
        for rr in msg
            .answers
            .iter()
            .chain(&msg.authority)
            .chain(&msg.additional)
        {
            let _ = rr.to_string();
        }
    }
});
