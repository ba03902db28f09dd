//! Hostlist expressions (`NodeName=`, `File=`): `hostlist::expand` must
//! return names or an error, within its expansion bound, for any text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use gres_core::hostlist::{expand, MAX_EXPANSION};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(names) = expand(&text) {
        assert!(names.len() <= MAX_EXPANSION, "{} names", names.len());
    }
});
