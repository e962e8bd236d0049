//! `roundtable sandbox reach SOCKET`: doctor's proof that an agent container can connect to a
//! Unix socket bind-mounted from the host, as sessions' egress, broker and MCP sockets are
//! (gVisor refuses unless its runtime allows host sockets).

use std::io::{BufRead as _, BufReader, Read as _};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Connects to `socket` and returns the first line it answers (at most 4 KiB), without its
/// newline.
pub fn run(socket: &Path) -> std::io::Result<String> {
    let stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut line = String::new();
    BufReader::new(stream.take(4096)).read_line(&mut line)?;
    Ok(line.trim_end().to_owned())
}
