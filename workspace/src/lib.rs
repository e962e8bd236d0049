//! The host side of an agent's workspace, with no container engine: the revision-pinned,
//! path-filtered source (provisioning from git), the rooted extractor for what comes back, the
//! patch and its verification, and the controller's private folders and session socket folders.

pub mod changes;
pub mod extract;
pub mod git;
pub mod patch;
pub mod private_dir;
pub mod provision;
pub mod runs;
pub mod settle;
pub mod sockets;
