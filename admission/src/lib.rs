//! Receipt-gated admission. An adapter may spawn only when a sealed receipt pins the same
//! evidence the spawn path re-derives: its contract, the version and help surface probed inside
//! its image, its capability profile, a replay of the contract's golden transcripts through the
//! real launch planner and output capture, and the canary attestation for the image.
//!
//! Everything here is decided from values handed in (the probe's output, the stored receipt,
//! the clock); the service layer gathers them.

pub mod authority;
mod canary;
pub mod contracts;
pub mod evidence;
pub mod gate;
pub mod launch;
mod probing;
pub mod receipts;
pub mod replay;
mod route;
pub mod surface;

pub use authority::{Admitter, Check, GateOutcome};
pub use contracts::{ContractError, LoadedContract};
pub use evidence::Evidence;
pub use gate::{Anchor, Stored};
pub use launch::{LaunchError, Launchable, RuntimeRefused};
pub use receipts::ReceiptFolder;
