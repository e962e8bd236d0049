//! Roundtable's egress gateway: an exact-host CONNECT proxy for agents in network-less
//! containers. The CONNECT head is parsed strictly (byte-exact `host:443`, canonical host, exact
//! allowlist), the host is resolved once and every answer classified (any non-public address
//! denies the tunnel unless an explicit `allowCidrs` entry covers it), the ClientHello is checked
//! (exactly one SNI equal to the CONNECT host, no ECH) before anything reaches upstream, and only
//! the pinned, validated address is dialed. The in-container proxy forwards to it.

pub mod address;
pub mod client_hello;
pub mod craft;
pub mod dial;
mod dns_message;
pub mod forward;
pub mod journal;
pub mod limits;
pub mod local;
pub mod metrics;
pub mod pinned;
pub mod properties;
pub mod request;
pub mod resolve;
pub mod server;
pub mod settings;
pub mod splice;
pub mod tunnel;
pub mod zero_copy;

pub use dial::{Dial, DirectDialer};
pub use journal::{Close, CounterSnapshot, Counters, Decision, Journal, StdoutJournal};
pub use pinned::{Connected, Dialed, Lookup, PinError};
pub use resolve::{DnsResolver, LookupError, Resolve};
pub use roundtable_specs::egress::{self, AddressClass, CloseReason, GatewayReason};
pub use server::{Endpoint, Listener, serve};
pub use settings::{Limits, Settings, SplicePath};
pub use tunnel::Gateway;
pub use zero_copy::ClientStream;
