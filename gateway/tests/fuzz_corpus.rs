//! The committed fuzz corpus (`fuzz/seeds/<target>/`) through the same properties the fuzz
//! targets check (`roundtable_gateway::properties`), in every test run: what the fuzzer once
//! started from or found stays a regression test without libFuzzer or a nightly toolchain.

use std::path::Path;

use roundtable_gateway::properties;

/// Every file of `fuzz/seeds/<target>/` through `check`; how many there were.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds").join(target);
    let mut seen = 0;
    for entry in std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("{}: {e}", folder.display())) {
        let path = entry.expect("an entry").path();
        let bytes = std::fs::read(&path).expect("a seed");
        let outcome = std::panic::catch_unwind(|| check(&bytes));
        assert!(outcome.is_ok(), "{} breaks the property of {target}", path.display());
        seen += 1;
    }
    seen
}

#[test]
fn every_seed_of_every_target_holds_its_property() {
    assert!(replay("client_hello", properties::client_hello) >= 6);
    assert!(replay("connect_head", properties::connect_head) >= 3);
    assert!(replay("dns_response", properties::dns_response) >= 8);
}
