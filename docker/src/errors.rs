//! How the engine's errors read as the runtime's: one step-named conversion, and the two
//! classifications the lifecycle acts on (the thing is already gone; the engine itself is gone).

use roundtable_session_runtime::{BoxError, RuntimeError};

/// The conversion for an engine call that failed at `step`; the engine's error is kept whole
/// for the error chain (and for [`engine_gone`]).
pub(crate) fn engine_error(step: &'static str) -> impl FnOnce(bollard::errors::Error) -> RuntimeError {
    move |source| RuntimeError::Engine { step, source: Box::new(source) }
}

/// The conversion for host IO that failed at `step`.
pub(crate) fn io_error(step: &'static str) -> impl Fn(std::io::Error) -> RuntimeError + Copy {
    move |source| RuntimeError::Io { step, source }
}

/// Whether the engine answered that the thing asked for is not there (a removal of something
/// already removed, an image it does not have).
pub(crate) fn already_gone(error: &bollard::errors::Error) -> bool {
    matches!(error, bollard::errors::Error::DockerResponseServerError { status_code: 404, .. })
}

/// Whether `error` means the engine could not be reached or dropped the connection, rather than
/// an answer it gave (a refusal, a missing object) or a request it never finished in time.
pub(crate) fn engine_gone(error: &bollard::errors::Error) -> bool {
    use bollard::errors::Error as E;
    matches!(
        error,
        E::HyperLegacyError { .. } | E::HyperResponseError { .. } | E::IOError { .. } | E::SocketNotFoundError(_)
    )
}

/// Whether the source of a [`RuntimeError::Engine`] is [`engine_gone`].
pub(crate) fn engine_gone_in(source: &BoxError) -> bool {
    source.downcast_ref::<bollard::errors::Error>().is_some_and(engine_gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_connection_that_fails_means_the_engine_is_gone() {
        use bollard::errors::Error as E;
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let cases = [
            (E::IOError { err: refused }, true),
            (E::SocketNotFoundError("/run/docker.sock".into()), true),
            (E::DockerResponseServerError { status_code: 404, message: "No such exec instance".into() }, false),
            (E::DockerResponseServerError { status_code: 409, message: "is not running".into() }, false),
            (E::RequestTimeoutError, false),
        ];
        for (error, gone) in cases {
            assert_eq!(engine_gone(&error), gone, "{error:?}");
        }
    }
}
