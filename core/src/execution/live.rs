//! Running agents' output as it is produced, for the console's live tail: per session, the last
//! lines, each masked like the kept log (every credential and placeholder the session holds) before
//! anyone can read it. Memory only and bounded; a session's log leaves when the session ends, and
//! its whole log is then read from its folder.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use roundtable_session_runtime::{LiveSink, OutputStream};
use roundtable_specs::secrets::KnownSecrets;

/// Lines kept per running session.
const KEPT_LINES: usize = 1000;
/// A line longer than this is handed on in pieces (an agent that prints no newline).
const MAX_LINE: usize = 4096;

/// One session's live output.
pub struct LiveLog {
    /// What the session holds: masked in every line, the last partial one included.
    known: KnownSecrets,
    state: Mutex<LiveState>,
}

#[derive(Default)]
struct LiveState {
    /// `(number, masked line)`; numbers keep counting past what was dropped.
    lines: VecDeque<(u64, String)>,
    next: u64,
    partial: [Vec<u8>; 2],
    ended: bool,
}

/// What a reader gets: the lines after the number it last saw, and whether the session ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LiveLines {
    pub lines: Vec<(u64, String)>,
    pub ended: bool,
}

impl LiveLog {
    fn new(known: KnownSecrets) -> Self {
        Self { known, state: Mutex::new(LiveState::default()) }
    }

    /// The lines numbered above `after` (all when `None`).
    pub fn since(&self, after: Option<u64>) -> LiveLines {
        let Ok(state) = self.state.lock() else { return LiveLines { lines: Vec::new(), ended: true } };
        let lines = state.lines.iter().filter(|(n, _)| after.is_none_or(|a| *n > a)).cloned().collect();
        LiveLines { lines, ended: state.ended }
    }

    fn push(&self, stream: OutputStream, chunk: &[u8]) {
        let Ok(mut state) = self.state.lock() else { return };
        let index = usize::from(stream == OutputStream::Stderr);
        state.partial[index].extend_from_slice(chunk);
        let mut complete = Vec::new();
        loop {
            let partial = &mut state.partial[index];
            let cut = match partial.iter().position(|b| *b == b'\n') {
                Some(at) => at + 1,
                None if partial.len() >= MAX_LINE => MAX_LINE,
                None => break,
            };
            let line: Vec<u8> = partial.drain(..cut).collect();
            complete.push(line);
        }
        for line in complete {
            state.add(&self.known, stream, &line);
        }
    }

    fn end(&self) {
        if let Ok(mut state) = self.state.lock() {
            for (index, stream) in [(0, OutputStream::Stdout), (1, OutputStream::Stderr)] {
                let rest = std::mem::take(&mut state.partial[index]);
                if !rest.is_empty() {
                    state.add(&self.known, stream, &rest);
                }
            }
            state.ended = true;
        }
    }
}

impl LiveState {
    fn add(&mut self, known: &KnownSecrets, stream: OutputStream, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = known.mask_text(text.trim_end_matches(['\n', '\r']));
        let text = roundtable_specs::secrets::redact(text.as_bytes());
        let text = if stream == OutputStream::Stderr { format!("stderr: {text}") } else { text };
        self.lines.push_back((self.next, text));
        self.next += 1;
        while self.lines.len() > KEPT_LINES {
            self.lines.pop_front();
        }
    }
}

/// The live logs of this controller's running sessions.
#[derive(Default)]
pub struct LiveLogs {
    by_session: Mutex<HashMap<String, Arc<LiveLog>>>,
}

impl LiveLogs {
    /// Starts `session`'s log, masking with `known`.
    pub fn open(&self, session: &str, known: KnownSecrets) {
        if let Ok(mut logs) = self.by_session.lock() {
            logs.insert(session.to_owned(), Arc::new(LiveLog::new(known)));
        }
    }

    /// The sink `session`'s runtime hands its output to, while its log is open.
    pub fn sink(&self, session: &str) -> Option<LiveSink> {
        let log = self.get(session)?;
        Some(Arc::new(move |stream, chunk| log.push(stream, chunk)))
    }

    /// Ends `session`'s log: its readers are told, and it is no longer listed.
    pub fn close(&self, session: &str) {
        let removed = self.by_session.lock().ok().and_then(|mut logs| logs.remove(session));
        if let Some(log) = removed {
            log.end();
        }
    }

    /// `session`'s log while it runs on this controller.
    pub fn get(&self, session: &str) -> Option<Arc<LiveLog>> {
        self.by_session.lock().ok()?.get(session).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_masked_numbered_and_bounded() {
        let logs = LiveLogs::default();
        let known = KnownSecrets::new([("ACME_API_KEY", "acme-live-0123456789abcdef")]);
        logs.open("s1", known);
        let sink = logs.sink("s1").expect("open");
        sink(OutputStream::Stdout, b"key is acme-live-01234");
        sink(OutputStream::Stdout, b"56789abcdef\nsecond");
        sink(OutputStream::Stderr, b"oops\n");
        let log = logs.get("s1").expect("running");
        let read = log.since(None);
        assert_eq!(
            read.lines,
            vec![(0, "key is [redacted:ACME_API_KEY]".to_owned()), (1, "stderr: oops".to_owned())],
            "a value split across chunks is masked whole; a partial line waits"
        );
        assert!(!read.ended);
        assert_eq!(log.since(Some(0)).lines.len(), 1);
        for i in 0..(KEPT_LINES + 10) {
            sink(OutputStream::Stdout, format!("{i}\n").as_bytes());
        }
        assert_eq!(log.since(None).lines.len(), KEPT_LINES);
        logs.close("s1");
        assert!(logs.get("s1").is_none());
        let after = log.since(None);
        assert!(after.ended);
        assert_eq!(after.lines.last().map(|(_, l)| l.as_str()), Some(&*format!("{}", KEPT_LINES + 9)));
    }
}
