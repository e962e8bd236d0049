//! The session's socket directory: `/run/roundtable/<session>/` (`$XDG_RUNTIME_DIR/roundtable/…`
//! when not root), mounted at `/run/roundtable` in the container. UID 1000 can enter it and each
//! socket bound in it is chowned to UID 1000 (connecting needs write permission on the socket).
//! Unix socket paths are limited to 108 bytes, so the length is checked when the folder is planned.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use roundtable_specs::layout::AGENT_UID;

/// The longest socket file name placed in the directory (`egress.sock`, `mcp.sock`).
pub const LONGEST_SOCKET_NAME: &str = "egress.sock";
/// `sun_path` holds 108 bytes including the terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;

#[derive(Debug, thiserror::Error)]
pub enum SocketDirError {
    #[error("socket path {path} would be {len} bytes; Unix sockets allow {MAX_SOCKET_PATH}")]
    TooLong { path: String, len: usize },
    #[error("cannot prepare the socket directory {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where sockets live: `/run/roundtable` as root, else `$XDG_RUNTIME_DIR/roundtable`.
pub fn default_root(is_root: bool) -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !is_root => PathBuf::from(dir).join("roundtable"),
        _ => PathBuf::from("/run/roundtable"),
    }
}

/// Whether this process runs as root (effective UID 0).
pub fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// [`default_root`] for the user this process runs as.
pub fn default_root_for_this_user() -> PathBuf {
    default_root(running_as_root())
}

/// The directory for `session` under `root`, checked for socket path length.
pub fn plan(root: &Path, session: &str) -> Result<PathBuf, SocketDirError> {
    let dir = root.join(session);
    let longest = dir.join(LONGEST_SOCKET_NAME).display().to_string();
    if longest.len() > MAX_SOCKET_PATH {
        return Err(SocketDirError::TooLong { len: longest.len(), path: longest });
    }
    Ok(dir)
}

/// Creates the directory (0750, group 1000 so the agent can enter it) under a root-only parent.
pub fn create(dir: &Path) -> Result<(), SocketDirError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| SocketDirError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750)).map_err(io(dir))?;
    let owner = rustix::fs::Uid::from_raw(rustix::process::getuid().as_raw());
    let group = rustix::fs::Gid::from_raw(AGENT_UID);
    rustix::fs::chown(dir, Some(owner), Some(group))
        .map_err(|e| SocketDirError::Io { path: dir.to_owned(), source: e.into() })?;
    Ok(())
}

/// Gives a bound socket to the agent's UID.
pub fn hand_to_agent(socket: &Path) -> Result<(), SocketDirError> {
    let uid = rustix::fs::Uid::from_raw(AGENT_UID);
    let gid = rustix::fs::Gid::from_raw(AGENT_UID);
    rustix::fs::chown(socket, Some(uid), Some(gid))
        .map_err(|e| SocketDirError::Io { path: socket.to_owned(), source: e.into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_socket_paths_are_refused_when_planned() {
        assert!(plan(Path::new("/run/roundtable"), "0123456789ab").is_ok());
        let deep = PathBuf::from(format!("/{}", "d".repeat(100)));
        assert!(matches!(plan(&deep, "0123456789ab"), Err(SocketDirError::TooLong { .. })));
    }
}
