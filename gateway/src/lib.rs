//! Roundtable's egress gateway. Today: the address policy (every resolved address classified,
//! any non-public one denies the tunnel unless an explicit `allowCidrs` entry covers it) and the
//! ClientHello validator (first-byte gate, bounded record reassembly, exactly one `host_name` SNI
//! equal to the CONNECT host, no ECH). The CONNECT front end, pinned DNS and the sidecar build on
//! these.

pub mod address;
pub mod client_hello;
