//! The CONNECT head parser: never a panic, and a complete head always yields a canonical host
//! that the host rules accept again, with the head ending inside the input.

#![no_main]

use libfuzzer_sys::fuzz_target;
use roundtable_gateway::request::{Head, canonical_host, parse_head};

fuzz_target!(|data: &[u8]| {
    if let Head::Complete { host, end } = parse_head(data) {
        assert!(end <= data.len());
        assert_eq!(canonical_host(&host).as_deref(), Ok(host.as_str()));
    }
});
