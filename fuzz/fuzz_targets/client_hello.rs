//! The ClientHello path as the gateway drives it (`roundtable_gateway::properties::client_hello`
//! says what must hold).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| roundtable_gateway::properties::client_hello(data));
