//! Process limits a gateway needs: each tunnel holds two descriptors (six while spliced in the
//! kernel, with a pipe pair per direction), so the soft open-file limit (often 1024) is raised to
//! the hard one at start.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Raises the soft open-file limit to the hard limit; returns the limit now in force.
pub fn raise_open_file_limit() -> std::io::Result<Option<u64>> {
    let limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return Ok(limit.current);
    }
    setrlimit(Resource::Nofile, Rlimit { current: limit.maximum, maximum: limit.maximum })?;
    Ok(limit.maximum)
}
