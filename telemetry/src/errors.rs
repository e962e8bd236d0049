//! How a failure is reported in a log line, a status message or an API error: the error and
//! every source under it, in one line.

/// An error and its sources, joined with `: `.
///
/// ```
/// let inner = std::io::Error::other("disk full");
/// let outer = std::io::Error::new(std::io::ErrorKind::Other, inner);
/// assert_eq!(roundtable_telemetry::error_chain(&outer), "disk full");
/// ```
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot record the proposal")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn every_source_is_joined_in_order() {
        let error = Outer(std::io::Error::other("disk full"));
        assert_eq!(error_chain(&error), "cannot record the proposal: disk full");
    }
}
