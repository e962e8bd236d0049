//! The CONNECT head parser (`roundtable_gateway::properties::connect_head` says what must hold).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| roundtable_gateway::properties::connect_head(data));
