//! Roundtable's egress gateway. Today its three policy cores, each pure and table-tested: the
//! CONNECT request (bounded head, byte-exact `host:443`, canonical host, exact allowlist), the
//! address policy (every resolved address classified; any non-public one denies the tunnel unless
//! an explicit `allowCidrs` entry covers it) and the ClientHello validator (first-byte gate,
//! bounded record reassembly, exactly one `host_name` SNI equal to the CONNECT host, no ECH). The
//! tunnel loop, pinned DNS and the sidecar build on these.

pub mod address;
pub mod client_hello;
pub mod request;
