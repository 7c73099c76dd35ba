//! Any bytes as a kept copy read back (`heron_xfr::secondary::seal`):
//! the check never panics; the same bytes sealed always pass it, and
//! with any one octet of the sealed file changed they never do.
#![no_main]

use heron_xfr::secondary::seal::{check, write_sealed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = check(data);
    let mut sealed = Vec::new();
    write_sealed(&mut sealed, "; zone fuzz. serial 1", |w| w.write_all(data)).unwrap();
    assert_eq!(check(&sealed), Ok(()));
    if let Some((&at, _)) = data.split_first() {
        let i = at as usize * sealed.len() / 256;
        sealed[i] ^= 0x55;
        assert!(check(&sealed).is_err(), "octet {i} changed");
    }
});
