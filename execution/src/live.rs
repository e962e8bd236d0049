//! Running agents' output as it is produced, for the console's live tail: per session, the last
//! lines, each masked like the kept log (every credential and placeholder the session holds) before
//! anyone can read it. Memory only and bounded; a session's log leaves when the session ends, and
//! its whole log is then read from its folder. It also keeps what the agent printed up to the
//! adapter's output limit, as the runtime does, so that a run the runtime loses (the engine gone
//! mid-run) still leaves its output.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use roundtable_session_runtime::{Captured, LiveSink, OutputStream};
use roundtable_specs::secrets::KnownSecrets;

/// Lines kept per running session.
const KEPT_LINES: usize = 1000;
/// A line longer than this is handed on in pieces (an agent that prints no newline).
const MAX_LINE: usize = 4096;
/// Bytes held back beyond the longest known value: a value's whole-word check reads the byte
/// after it, and what is shaped like a secret is matched within a line piece.
const HOLD_MARGIN: usize = 256;

/// One session's live output.
pub struct LiveLog {
    /// What the session holds: masked in every line, the last partial one included.
    known: KnownSecrets,
    /// The adapter's output limit: how much of each stream [`KeptOutput`] keeps.
    limit: u64,
    state: Mutex<LiveState>,
}

/// What the agent printed, as the runtime would have captured it (up to the output limit, not
/// masked yet): kept for a run whose outcome the runtime could not return.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KeptOutput {
    pub stdout: Captured,
    pub stderr: Captured,
}

#[derive(Default)]
struct LiveState {
    /// `(number, stream, line masked of the known values)`; numbers keep counting past what was
    /// dropped. Kept as bytes: the rest of the work (redaction, text) is done for what is read,
    /// not for every line of a flood.
    lines: VecDeque<(u64, OutputStream, Vec<u8>)>,
    next: u64,
    partial: [Vec<u8>; 2],
    ended: bool,
    kept: KeptOutput,
}

/// What a reader gets: the lines after the number it last saw, and whether the session ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LiveLines {
    pub lines: Vec<(u64, String)>,
    pub ended: bool,
}

impl LiveLog {
    fn new(known: KnownSecrets, limit: u64) -> Self {
        Self { known, limit, state: Mutex::new(LiveState::default()) }
    }

    /// The lines numbered above `after` (all when `None`), what is shaped like a secret redacted.
    pub fn since(&self, after: Option<u64>) -> LiveLines {
        let (raw, ended) = {
            let Ok(state) = self.state.lock() else { return LiveLines { lines: Vec::new(), ended: true } };
            let raw: Vec<(u64, OutputStream, Vec<u8>)> =
                state.lines.iter().filter(|(n, _, _)| after.is_none_or(|a| *n > a)).cloned().collect();
            (raw, state.ended)
        };
        let lines = raw
            .into_iter()
            .map(|(n, stream, line)| {
                let text = roundtable_specs::secrets::redact(&line);
                let text = text.trim_end_matches(['\n', '\r']);
                (n, if stream == OutputStream::Stderr { format!("stderr: {text}") } else { text.to_owned() })
            })
            .collect();
        LiveLines { lines, ended }
    }

    /// Takes a chunk of `stream`. The stream's pending bytes are masked as one, so a value split
    /// across chunks is found whole. A complete line is handed on at once, unless some value
    /// holds a line break; a piece of a line without one (a forced cut), or any line when a value
    /// spans lines, only once it lies before the last `longest value + margin` bytes: a value
    /// that starts there may not have arrived whole yet.
    fn push(&self, stream: OutputStream, chunk: &[u8]) {
        let Ok(mut state) = self.state.lock() else { return };
        let index = usize::from(stream == OutputStream::Stderr);
        let kept = if index == 0 { &mut state.kept.stdout } else { &mut state.kept.stderr };
        kept.push(chunk, self.limit);
        let mut pending = std::mem::take(&mut state.partial[index]);
        // Lines are cut as ranges of the pending bytes and copied once, below.
        pending.extend_from_slice(chunk);
        if !self.known.is_empty() {
            pending = self.known.mask(&pending);
        }
        let held = pending.len().saturating_sub(self.known.longest() + HOLD_MARGIN);
        let lines_end = if self.known.spans_lines() { held } else { pending.len() };
        let mut taken = 0;
        let mut lines = Vec::new();
        loop {
            let newline = pending[taken..lines_end.max(taken)].iter().position(|b| *b == b'\n');
            let cut = match newline {
                Some(at) => at + 1,
                None if held.saturating_sub(taken) >= MAX_LINE => MAX_LINE,
                None => break,
            };
            lines.push(taken..taken + cut);
            taken += cut;
        }
        // Of a flood, only the lines that will be kept are copied; the others are counted.
        let skipped = lines.len().saturating_sub(KEPT_LINES);
        state.next += skipped as u64;
        for range in lines.into_iter().skip(skipped) {
            state.add(stream, pending[range].to_vec());
        }
        pending.drain(..taken);
        state.partial[index] = pending;
    }

    fn end(&self) -> KeptOutput {
        let Ok(mut state) = self.state.lock() else { return KeptOutput::default() };
        {
            for (index, stream) in [(0, OutputStream::Stdout), (1, OutputStream::Stderr)] {
                let rest = self.known.mask(&std::mem::take(&mut state.partial[index]));
                for line in rest.split_inclusive(|b| *b == b'\n') {
                    state.add(stream, line.to_vec());
                }
            }
            state.ended = true;
        }
        std::mem::take(&mut state.kept)
    }
}

impl LiveState {
    /// Adds a line already masked of the known values.
    fn add(&mut self, stream: OutputStream, line: Vec<u8>) {
        self.lines.push_back((self.next, stream, line));
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
    /// Starts `session`'s log, masking with `known` and keeping up to `limit` bytes of each
    /// stream.
    pub fn open(&self, session: &str, known: KnownSecrets, limit: u64) {
        if let Ok(mut logs) = self.by_session.lock() {
            logs.insert(session.to_owned(), Arc::new(LiveLog::new(known, limit)));
        }
    }

    /// The sink `session`'s runtime hands its output to, while its log is open.
    pub fn sink(&self, session: &str) -> Option<LiveSink> {
        let log = self.get(session)?;
        Some(Arc::new(move |stream, chunk| log.push(stream, chunk)))
    }

    /// Ends `session`'s log: its readers are told, and it is no longer listed. Returns what the
    /// agent printed (not masked), when the log was open.
    pub fn close(&self, session: &str) -> Option<KeptOutput> {
        let removed = self.by_session.lock().ok().and_then(|mut logs| logs.remove(session));
        removed.map(|log| log.end())
    }

    /// `session`'s log while it runs on this controller.
    pub fn get(&self, session: &str) -> Option<Arc<LiveLog>> {
        self.by_session.lock().ok()?.get(session).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The logs with session `session` open, holding `name`'s `value`, and its sink.
    fn opened(session: &str, name: &str, value: &str) -> (LiveLogs, LiveSink) {
        let logs = LiveLogs::default();
        logs.open(session, KnownSecrets::new([(name, value)]), 1 << 20);
        let sink = logs.sink(session).expect("open");
        (logs, sink)
    }

    #[test]
    fn lines_are_masked_numbered_and_bounded() {
        let (logs, sink) = opened("s1", "ACME_API_KEY", "acme-live-0123456789abcdef");
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

    /// Everything the tail showed, joined.
    fn shown(logs: &LiveLogs, session: &str) -> String {
        let log = logs.get(session).expect("running");
        logs.close(session);
        log.since(None).lines.into_iter().map(|(_, line)| line).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn a_value_across_a_forced_cut_is_masked_whole() {
        let value = "acme-live-0123456789abcdef0123";
        let (logs, sink) = opened("s", "ACME_API_KEY", value);
        // A transcript line with no newline, the value straddling the 4 KiB cut.
        let mut line = "x".repeat(MAX_LINE - 10);
        line.push_str(value);
        line.push_str(&"y".repeat(3 * MAX_LINE));
        for piece in line.as_bytes().chunks(1000) {
            sink(OutputStream::Stdout, piece);
        }
        let text = shown(&logs, "s");
        assert!(!text.contains("0123456789abcdef"), "the value is shown");
        // A forced cut may fall inside the marker; the pieces read it whole.
        assert!(text.replace('\n', "").contains("[redacted:ACME_API_KEY]"), "no marker");
    }

    #[test]
    fn a_value_across_lines_is_masked_whole() {
        let pem = "-----BEGIN KEY-----\nAAAABBBBCCCCDDDD\nEEEEFFFF\n-----END KEY-----";
        let (logs, sink) = opened("s", "SA_KEY", pem);
        sink(OutputStream::Stdout, b"before\n-----BEGIN KEY-----\nAAAABBBB");
        sink(OutputStream::Stdout, b"CCCCDDDD\nEEEEFFFF\n-----END KEY-----\nafter\n");
        let text = shown(&logs, "s");
        assert!(!text.contains("AAAABBBB") && text.contains("[redacted:SA_KEY]"), "{text}");
        assert!(text.starts_with("before") && text.ends_with("after"), "{text}");
    }
}
