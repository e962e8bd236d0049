//! The DNS response reader (`roundtable_gateway::properties::dns_response` says what must hold).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| roundtable_gateway::properties::dns_response(data));
