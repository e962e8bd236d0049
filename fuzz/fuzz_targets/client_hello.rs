//! The ClientHello path as the gateway drives it: bytes arrive in chunks and `inspect` runs on
//! every prefix. It must never panic, and a `Valid` answer must name the expected host, cover no
//! more bytes than it was given, and be reproduced by exactly those bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use roundtable_gateway::client_hello::{Limits, Progress, inspect};

const HOST: &str = "api.example.com";

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, bytes)) = data.split_first() else { return };
    let chunk = usize::from(chunk).max(1);
    let limits = Limits::default();
    let mut end = 0;
    while end < bytes.len() {
        end = (end + chunk).min(bytes.len());
        match inspect(&bytes[..end], HOST, limits) {
            Progress::NeedMore => continue,
            Progress::Refused(_) => return,
            Progress::Valid { sni, bytes: used } => {
                assert!(sni.eq_ignore_ascii_case(HOST), "valid for another host: {sni}");
                assert!(used <= end, "claims {used} of {end} bytes");
                assert_eq!(inspect(&bytes[..used], HOST, limits), Progress::Valid { sni, bytes: used });
                return;
            }
        }
    }
});
