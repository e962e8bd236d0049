//! Loopback network fixtures for the gateway's tests and benchmarks: a DNS server whose answers
//! are scripted per name (rebinding, mixed answers, SERVFAIL, silence, one type dropped), upstream servers (TLS echo
//! with a fresh self-signed certificate, raw recorders) on per-test `127.0.0.N:443` addresses, and
//! a TLS client that trusts them, and fake model APIs (a scripted Responses stream for a real
//! CLI, and a provider answered per request for the credential broker). Nothing here touches a non-loopback address.

pub mod dns;
pub mod provider;
pub mod responses;
pub mod upstream;

pub use dns::{FakeDns, Family, Reply};
pub use provider::{Canned, FakeProvider};
pub use responses::{FakeResponses, Recorded, Script};
pub use upstream::{RawUpstream, TlsEcho, TlsIdentity, client_hello_for, read_head, tls_client, tls_connector};
