//! `roundtable sandbox check … -- ARGV`: the self-check that becomes the agent. It prints its
//! report as one line and waits; only when the controller, having read and verified that
//! report, writes the go byte on stdin does this same process `exec` the agent's argv. A failed
//! check, any other byte or end of file, and it exits without running anything.

use std::io::Read as _;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt as _;

/// What the controller writes on stdin once it has read and verified the report.
pub use roundtable_session_runtime::CHECK_GO;

/// Why the checked process did not become the agent.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("no command follows `--`")]
    NoCommand,
    #[error("the controller did not answer the report (stdin ended)")]
    NoAnswer,
    #[error("the controller did not let the agent start (byte {0:#04x})")]
    Refused(u8),
    #[error("cannot read the controller's answer")]
    Read(#[source] std::io::Error),
    #[error("cannot run {program}")]
    Exec {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

impl LaunchError {
    /// The exit code, as a shell gives it: 127 for a command that is not there, 126 for one that
    /// cannot run, 1 for no go.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Exec { source, .. } if source.kind() == std::io::ErrorKind::NotFound => 127,
            Self::Exec { .. } => 126,
            _ => 1,
        }
    }
}

/// Reads the controller's answer, one byte straight from the descriptor: a buffered read could
/// take the prompt that follows it, which is the agent's to read.
fn answer(answers: impl AsFd) -> Result<u8, LaunchError> {
    let stdin = answers.as_fd().try_clone_to_owned().map_err(LaunchError::Read)?;
    let mut stdin = std::fs::File::from(stdin);
    let mut byte = [0u8; 1];
    loop {
        match stdin.read(&mut byte) {
            Ok(0) => return Err(LaunchError::NoAnswer),
            Ok(_) => return Ok(byte[0]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(LaunchError::Read(error)),
        }
    }
}

/// Waits for the go byte on `answers` (stdin), then replaces this process with `argv`: the same
/// PID, user, environment, limits, seccomp filter and no_new_privs, so what was checked is what
/// runs, and the rest of stdin is the agent's. Returns only when that did not happen.
pub fn await_go_then_exec(argv: &[String], answers: impl AsFd) -> LaunchError {
    let Some((program, args)) = argv.split_first() else {
        return LaunchError::NoCommand;
    };
    match answer(answers) {
        Ok(CHECK_GO) => {}
        Ok(other) => return LaunchError::Refused(other),
        Err(error) => return error,
    }
    let source = std::process::Command::new(program).args(args).exec();
    LaunchError::Exec { program: program.clone(), source }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn the_go_byte_is_read_alone_and_the_rest_is_left_for_the_agent() {
        let (reader, mut writer) = std::io::pipe().expect("pipe");
        writer.write_all(b"Gthe prompt").expect("write");
        drop(writer);
        assert_eq!(answer(&reader).expect("answer"), CHECK_GO);
        let mut rest = String::new();
        let mut reader = reader;
        reader.read_to_string(&mut rest).expect("rest");
        assert_eq!(rest, "the prompt");
    }

    #[test]
    fn no_go_means_no_agent() {
        let argv = vec!["/bin/true".to_owned()];
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(writer);
        assert!(matches!(await_go_then_exec(&argv, &reader), LaunchError::NoAnswer));
        let (reader, mut writer) = std::io::pipe().expect("pipe");
        writer.write_all(b"x").expect("write");
        assert!(matches!(await_go_then_exec(&argv, &reader), LaunchError::Refused(b'x')));
        assert!(matches!(await_go_then_exec(&[], &reader), LaunchError::NoCommand));
    }

    #[test]
    fn a_command_that_is_not_there_exits_127() {
        let argv = vec!["/roundtable-test/no-such-agent".to_owned()];
        let (reader, mut writer) = std::io::pipe().expect("pipe");
        writer.write_all(&[CHECK_GO]).expect("write");
        let error = await_go_then_exec(&argv, &reader);
        assert!(matches!(error, LaunchError::Exec { .. }), "{error}");
        assert_eq!(error.exit_code(), 127);
    }
}
