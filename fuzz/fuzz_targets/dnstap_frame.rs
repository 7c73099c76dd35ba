//! Any bytes as what a Frame Streams reader sends a dnstap writer: the
//! control frame parser (`heron_server::dnstap::frame`) accepts or
//! refuses, never panics or reads past its bounds; both of its entries
//! (a slice, a stream) agree; and a frame it accepts writes back, with
//! one of its content types, to a frame that decodes the same.
#![no_main]

use heron_server::dnstap::frame::{self, Control, FrameError, MAX_CONTROL_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let from_slice = frame::decode(data);
    let from_stream = frame::read(&mut &data[..]);
    match &from_slice {
        Ok((control, used)) => {
            assert!(*used <= data.len() && *used <= 8 + MAX_CONTROL_LEN);
            assert_eq!(from_stream.as_ref().ok(), Some(control));
            rewrites_the_same(control);
        }
        Err(FrameError::Incomplete(need)) => {
            assert!(*need > data.len());
            assert!(from_stream.is_err());
        }
        Err(_) => assert!(from_stream.is_err()),
    }
});

fn rewrites_the_same(control: &Control) {
    let first = control.content_types.first().map(Vec::as_slice);
    let mut bytes = Vec::new();
    frame::control(control.kind, first, &mut bytes);
    let (again, used) = frame::decode(&bytes).expect("our own frame decodes");
    assert_eq!(used, bytes.len());
    assert_eq!(again.kind, control.kind);
    assert_eq!(again.content_types.first(), control.content_types.first());
}
