//! Reads the token usage a provider reports out of a response body as it streams past, in
//! bounded memory, whatever the chunking: Server-Sent Events line by line, a JSON body buffered
//! up to a cap.

use roundtable_specs::broker::{Scheme, Tokens};
use serde_json::Value;

/// The longest SSE line kept: a provider's usage event is a few hundred bytes, but a
/// `response.completed` event repeats the whole output, so this leaves room for a long answer.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;
/// The largest JSON body read; past it the usage is given up rather than buffered.
pub const MAX_JSON_BYTES: usize = 4 * 1024 * 1024;

/// Follows one response body and says, at its end, the usage it reported.
#[derive(Debug)]
pub struct UsageMeter {
    formats: &'static [Format],
    readings: [Reading; 3],
    body: Body,
    /// The scheme's last event passed (Anthropic's `message_delta` or `message_stop`, OpenAI's
    /// `response.completed`, `.incomplete` or `.failed`): the usage read is the whole answer's.
    terminal: bool,
}

/// How a body is framed, decided by its content type or, without one, by its first byte.
#[derive(Debug)]
enum Body {
    Undecided,
    Events(EventStream),
    Json(JsonBody),
}

impl UsageMeter {
    pub fn new(scheme: Scheme, content_type: Option<&str>) -> Self {
        let body = match content_type {
            Some(content_type) if is_event_stream(content_type) => Body::Events(EventStream::default()),
            Some(_) => Body::Json(JsonBody::default()),
            None => Body::Undecided,
        };
        UsageMeter { formats: formats_of(scheme), readings: Default::default(), body, terminal: false }
    }

    /// One chunk of the body, split anywhere.
    pub fn feed(&mut self, chunk: &[u8]) {
        if let Body::Undecided = self.body {
            let Some(first) = chunk.iter().find(|byte| !byte.is_ascii_whitespace()) else {
                // Leading whitespace means nothing in either framing.
                return;
            };
            self.body = match first {
                b'{' | b'[' => Body::Json(JsonBody::default()),
                _ => Body::Events(EventStream::default()),
            };
        }
        let (formats, readings, terminal) = (self.formats, &mut self.readings, &mut self.terminal);
        match &mut self.body {
            Body::Undecided => {}
            Body::Events(events) => events.feed(chunk, &mut |data| read_event(data, formats, readings, terminal)),
            Body::Json(json) => json.feed(chunk),
        }
    }

    /// The usage the body reported, `None` when none could be read. Reading more after this
    /// starts from nothing.
    pub fn finish(&mut self) -> Option<Tokens> {
        let (formats, readings, terminal) = (self.formats, &mut self.readings, &mut self.terminal);
        match std::mem::replace(&mut self.body, Body::Undecided) {
            Body::Undecided => {}
            Body::Events(mut events) => events.finish(&mut |data| read_event(data, formats, readings, terminal)),
            Body::Json(json) => {
                if let Some(value) = json.finish() {
                    read_value(&value, formats, readings);
                }
            }
        }
        let usage = formats.iter().find_map(|format| readings[*format as usize].tokens());
        self.readings = Default::default();
        usage
    }
}

impl UsageMeter {
    /// Whether the scheme's last event has passed, so the answer's usage is known even if the
    /// body is not read to its end.
    pub fn saw_last_event(&self) -> bool {
        self.terminal
    }
}

/// The events after which a provider reports nothing more about usage.
const TERMINAL_EVENTS: [&[u8]; 5] =
    [b"message_stop", b"message_delta", b"response.completed", b"response.incomplete", b"response.failed"];

fn is_terminal(value: &Value, formats: &[Format]) -> bool {
    let kind = value.get("type").and_then(Value::as_str).unwrap_or_default();
    formats.iter().any(|format| match format {
        Format::Anthropic => matches!(kind, "message_stop" | "message_delta"),
        Format::Openai => matches!(kind, "response.completed" | "response.incomplete" | "response.failed"),
        Format::Gemini => false,
    })
}

fn is_event_stream(content_type: &str) -> bool {
    let media_type = content_type.split(';').next().unwrap_or_default();
    media_type.trim().eq_ignore_ascii_case("text/event-stream")
}

/// A usage format, and its slot in [`UsageMeter::readings`].
#[derive(Debug, Clone, Copy)]
enum Format {
    Openai = 0,
    Anthropic = 1,
    Gemini = 2,
}

/// The formats a scheme's responses are read in, in order of preference. An unknown host is
/// tried in all of them; Anthropic's goes first there because a `message_delta` may carry a
/// top-level `usage` with `input_tokens` that OpenAI's reading would take without the cache
/// fields.
fn formats_of(scheme: Scheme) -> &'static [Format] {
    match scheme {
        Scheme::Openai => &[Format::Openai],
        Scheme::Anthropic => &[Format::Anthropic],
        Scheme::Gemini => &[Format::Gemini],
        Scheme::Custom => &[Format::Anthropic, Format::Openai, Format::Gemini],
    }
}

/// What one format has read so far. Every count is the provider's running total, so a later
/// figure replaces an earlier one.
#[derive(Debug, Default, Clone, Copy)]
struct Reading {
    input: Option<u64>,
    output: Option<u64>,
}

impl Reading {
    fn tokens(self) -> Option<Tokens> {
        // Output alone (an Anthropic delta without its message_start) would undercount the
        // input, so it is not a reading.
        let input = self.input?;
        Some(Tokens { input, output: self.output.unwrap_or(0) })
    }
}

fn read_event(data: &[u8], formats: &[Format], readings: &mut [Reading; 3], terminal: &mut bool) {
    // Most events are content deltas; parsing only those that mention usage or a last event
    // keeps a long stream cheap.
    let usage = contains(data, b"sage");
    let last = TERMINAL_EVENTS.iter().any(|name| contains(data, name));
    if !usage && !last {
        return;
    }
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        if usage {
            read_value(&value, formats, readings);
        }
        if last && is_terminal(&value, formats) {
            *terminal = true;
        }
    }
}

fn read_value(value: &Value, formats: &[Format], readings: &mut [Reading; 3]) {
    if let Value::Array(items) = value {
        // Gemini's streamGenerateContent without `alt=sse` is one array of responses.
        for item in items {
            read_value(item, formats, readings);
        }
        return;
    }
    for format in formats {
        let reading = &mut readings[*format as usize];
        match format {
            Format::Openai => read_openai(value, reading),
            Format::Anthropic => read_anthropic(value, reading),
            Format::Gemini => read_gemini(value, reading),
        }
    }
}

/// Responses events nest the usage in `response`; a Responses or Chat Completions body (or a
/// Chat Completions stream's last chunk) has it at the top.
fn read_openai(value: &Value, reading: &mut Reading) {
    let usage = value.pointer("/response/usage").filter(|usage| usage.is_object()).or_else(|| value.get("usage"));
    let Some(usage) = usage else { return };
    for (input, output) in [("input_tokens", "output_tokens"), ("prompt_tokens", "completion_tokens")] {
        if let Some(input) = count(usage, input) {
            *reading = Reading { input: Some(input), output: Some(count(usage, output).unwrap_or(0)) };
            return;
        }
    }
}

/// `message_start` carries the input (and a first output count) in `message.usage`;
/// `message_delta` carries cumulative counts in `usage`, always the output and sometimes the
/// input; a JSON body has them all in `usage`. Cache writes and reads are input the provider
/// bills apart from `input_tokens`.
fn read_anthropic(value: &Value, reading: &mut Reading) {
    let usage = match value.get("type").and_then(Value::as_str) {
        Some("message_start") => value.pointer("/message/usage"),
        Some("message_delta" | "message") => value.get("usage"),
        _ => None,
    };
    let Some(usage) = usage else { return };
    let parts = ["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"];
    if parts.iter().any(|part| count(usage, part).is_some()) {
        reading.input = Some(parts.iter().filter_map(|part| count(usage, part)).fold(0, u64::saturating_add));
    }
    if let Some(output) = count(usage, "output_tokens") {
        reading.output = Some(output);
    }
}

/// Every Gemini chunk may carry `usageMetadata`, each a running total: the last wins. Tool-use
/// prompt tokens are input the total counts beside the prompt; thoughts are output.
fn read_gemini(value: &Value, reading: &mut Reading) {
    let Some(usage) = value.get("usageMetadata") else { return };
    let sum = |fields: &[&str]| {
        let counts: Vec<u64> = fields.iter().filter_map(|field| count(usage, field)).collect();
        (!counts.is_empty()).then(|| counts.into_iter().fold(0, u64::saturating_add))
    };
    let input = sum(&["promptTokenCount", "toolUsePromptTokenCount"]);
    let output = sum(&["candidatesTokenCount", "thoughtsTokenCount"]);
    if input.is_some() || output.is_some() {
        *reading = Reading { input: Some(input.unwrap_or(0)), output };
    }
}

fn count(usage: &Value, field: &str) -> Option<u64> {
    usage.get(field).and_then(Value::as_u64)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

/// A Server-Sent Events decoder holding at most one partial line and one event's data, each
/// capped at [`MAX_LINE_BYTES`].
#[derive(Debug, Default)]
struct EventStream {
    line: Vec<u8>,
    /// The current line grew past the cap: it is dropped up to its end.
    skipping_line: bool,
    /// The last byte seen was a CR, so an LF right after it ends nothing.
    after_cr: bool,
    data: Vec<u8>,
    has_data: bool,
    /// The current event's data grew past the cap: the event is dropped at its blank line.
    skipping_event: bool,
}

impl EventStream {
    fn feed(&mut self, mut chunk: &[u8], on_event: &mut dyn FnMut(&[u8])) {
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while !chunk.is_empty() {
            let Some(end) = chunk.iter().position(|byte| *byte == b'\n' || *byte == b'\r') else {
                self.extend_line(chunk);
                return;
            };
            self.extend_line(&chunk[..end]);
            let terminator = chunk[end];
            chunk = &chunk[end + 1..];
            if terminator == b'\r' {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            self.end_line(on_event);
        }
    }

    /// A stream cut without its last blank line still says what it said.
    fn finish(&mut self, on_event: &mut dyn FnMut(&[u8])) {
        if !self.line.is_empty() || self.skipping_line {
            self.end_line(on_event);
        }
        self.end_line(on_event);
    }

    fn extend_line(&mut self, bytes: &[u8]) {
        if self.skipping_line {
            return;
        }
        if self.line.len() + bytes.len() > MAX_LINE_BYTES {
            self.skipping_line = true;
            self.line = Vec::new();
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn end_line(&mut self, on_event: &mut dyn FnMut(&[u8])) {
        if std::mem::take(&mut self.skipping_line) {
            // Whatever the long line was, its event lost a piece of its data.
            self.skipping_event = true;
            return;
        }
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(on_event);
        } else {
            self.field(&line);
            self.line = line;
            self.line.clear();
        }
    }

    fn field(&mut self, line: &[u8]) {
        if line.starts_with(b":") {
            return;
        }
        let (name, value) = match line.iter().position(|byte| *byte == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        // Only `data` carries what is read; `event`, `id` and `retry` repeat or add nothing.
        if name != b"data" || self.skipping_event {
            return;
        }
        let joined = self.data.len() + usize::from(self.has_data) + value.len();
        if joined > MAX_LINE_BYTES {
            self.skipping_event = true;
            self.data = Vec::new();
            return;
        }
        if self.has_data {
            self.data.push(b'\n');
        }
        self.data.extend_from_slice(value);
        self.has_data = true;
    }

    fn dispatch(&mut self, on_event: &mut dyn FnMut(&[u8])) {
        if self.has_data && !self.skipping_event {
            on_event(&self.data);
        }
        self.data.clear();
        self.has_data = false;
        self.skipping_event = false;
    }
}

/// A JSON body kept whole up to [`MAX_JSON_BYTES`].
#[derive(Debug, Default)]
struct JsonBody {
    bytes: Vec<u8>,
    too_large: bool,
}

impl JsonBody {
    fn feed(&mut self, chunk: &[u8]) {
        if self.too_large {
            return;
        }
        if self.bytes.len() + chunk.len() > MAX_JSON_BYTES {
            self.too_large = true;
            self.bytes = Vec::new();
            return;
        }
        self.bytes.extend_from_slice(chunk);
    }

    fn finish(self) -> Option<Value> {
        if self.too_large {
            return None;
        }
        serde_json::from_slice(&self.bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SSE: Option<&str> = Some("text/event-stream; charset=utf-8");
    const JSON: Option<&str> = Some("application/json");

    fn meter(scheme: Scheme, content_type: Option<&str>, body: &[u8]) -> Option<Tokens> {
        let mut meter = UsageMeter::new(scheme, content_type);
        meter.feed(body);
        meter.finish()
    }

    /// The body fed whole, then split in two at every byte and in three around every byte,
    /// must read the same.
    fn read_at_every_split(scheme: Scheme, content_type: Option<&str>, body: &[u8]) -> Option<Tokens> {
        let whole = meter(scheme, content_type, body);
        for split in 0..=body.len() {
            let mut meter = UsageMeter::new(scheme, content_type);
            meter.feed(&body[..split]);
            meter.feed(&body[split..]);
            assert_eq!(meter.finish(), whole, "split at {split}");
        }
        for split in 0..body.len() {
            let mut meter = UsageMeter::new(scheme, content_type);
            meter.feed(&body[..split]);
            meter.feed(&body[split..split + 1]);
            meter.feed(&[]);
            meter.feed(&body[split + 1..]);
            assert_eq!(meter.finish(), whole, "one byte alone at {split}");
        }
        whole
    }

    fn tokens(input: u64, output: u64) -> Option<Tokens> {
        Some(Tokens { input, output })
    }

    const OPENAI_RESPONSES_SSE: &str = concat!(
        "event: response.created\n",
        "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null}}\n",
        "\n",
        "event: response.output_text.delta\n",
        "data: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"delta\":\"Grüß \u{1F600}\"}\n",
        "\n",
        ": keep-alive\n",
        "\n",
        "event: response.completed\n",
        "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",",
        "\"usage\":{\"input_tokens\":1200,\"input_tokens_details\":{\"cached_tokens\":1000},",
        "\"output_tokens\":345,\"output_tokens_details\":{\"reasoning_tokens\":100},\"total_tokens\":1545}}}\n",
        "\n",
    );

    #[test]
    fn openai_responses_stream_reads_the_completed_usage_at_every_split() {
        assert_eq!(read_at_every_split(Scheme::Openai, SSE, OPENAI_RESPONSES_SSE.as_bytes()), tokens(1200, 345));
    }

    #[test]
    fn openai_incomplete_and_failed_responses_report_their_usage() {
        for kind in ["response.incomplete", "response.failed"] {
            let body = format!(
                "data:{{\"type\":\"{kind}\",\"response\":{{\"usage\":{{\"input_tokens\":7,\"output_tokens\":3}}}}}}\r\n\r\n"
            );
            assert_eq!(meter(Scheme::Openai, SSE, body.as_bytes()), tokens(7, 3), "{kind}");
        }
    }

    #[test]
    fn openai_json_bodies_in_responses_and_chat_completions_style() {
        let responses =
            br#"{"id":"resp_1","object":"response","usage":{"input_tokens":10,"output_tokens":4,"total_tokens":14}}"#;
        assert_eq!(read_at_every_split(Scheme::Openai, JSON, responses), tokens(10, 4));
        let chat =
            br#"{"object":"chat.completion","usage":{"prompt_tokens":19,"completion_tokens":9,"total_tokens":28}}"#;
        assert_eq!(meter(Scheme::Openai, JSON, chat), tokens(19, 9));
    }

    #[test]
    fn a_chat_completions_stream_reads_its_last_chunk_and_ignores_done() {
        let body = concat!(
            "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\n",
            "data: {\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(read_at_every_split(Scheme::Openai, SSE, body.as_bytes()), tokens(5, 2));
    }

    const ANTHROPIC_SSE: &str = concat!(
        "event: message_start\r\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",",
        "\"content\":[],\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":100,",
        "\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}\r\n",
        "\r\n",
        "event: ping\r\n",
        "data: {\"type\": \"ping\"}\r\n",
        "\r\n",
        "event: content_block_delta\r\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ça va \u{00e9}\"}}\r\n",
        "\r\n",
        "event: message_delta\r\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":40}}\r\n",
        "\r\n",
        "event: message_delta\r\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":89}}\r\n",
        "\r\n",
        "event: message_stop\r\n",
        "data: {\"type\":\"message_stop\"}\r\n",
        "\r\n",
    );

    #[test]
    fn anthropic_stream_counts_cache_as_input_and_the_last_delta_as_output_at_every_split() {
        assert_eq!(read_at_every_split(Scheme::Anthropic, SSE, ANTHROPIC_SSE.as_bytes()), tokens(2125, 89));
    }

    #[test]
    fn an_anthropic_delta_with_input_counts_replaces_the_start() {
        let body = concat!(
            "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
            "data: {\"type\":\"message_delta\",\"usage\":{\"input_tokens\":30,\"cache_read_input_tokens\":5,\"output_tokens\":12}}\n\n",
        );
        assert_eq!(meter(Scheme::Anthropic, SSE, body.as_bytes()), tokens(35, 12));
    }

    #[test]
    fn an_anthropic_delta_without_its_start_is_not_a_reading() {
        let body = "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":12}}\n\n";
        assert_eq!(meter(Scheme::Anthropic, SSE, body.as_bytes()), None);
    }

    #[test]
    fn anthropic_json_body() {
        let body = br#"{"id":"msg_1","type":"message","content":[{"type":"text","text":"Hi"}],
            "usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":30,"output_tokens":6}}"#;
        assert_eq!(read_at_every_split(Scheme::Anthropic, JSON, body), tokens(42, 6));
    }

    const GEMINI_SSE: &str = concat!(
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hallo \u{00fc}\"}],\"role\":\"model\"}}],",
        "\"usageMetadata\":{\"promptTokenCount\":50,\"totalTokenCount\":50}}\r\n\r\n",
        "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Welt\"}],\"role\":\"model\"},\"finishReason\":\"STOP\"}],",
        "\"usageMetadata\":{\"promptTokenCount\":50,\"candidatesTokenCount\":20,\"thoughtsTokenCount\":30,",
        "\"totalTokenCount\":100}}\r\n\r\n",
    );

    #[test]
    fn gemini_stream_takes_the_last_usage_with_thoughts_as_output_at_every_split() {
        assert_eq!(read_at_every_split(Scheme::Gemini, SSE, GEMINI_SSE.as_bytes()), tokens(50, 50));
    }

    #[test]
    fn gemini_json_body_and_json_array_of_responses() {
        let body = br#"{"candidates":[],"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":2,"totalTokenCount":10}}"#;
        assert_eq!(meter(Scheme::Gemini, JSON, body), tokens(8, 2));
        let array = br#"[
            {"candidates":[],"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8}},
            {"candidates":[],"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":5,"thoughtsTokenCount":1,
             "toolUsePromptTokenCount":3,"totalTokenCount":17}}
        ]"#;
        assert_eq!(read_at_every_split(Scheme::Gemini, JSON, array), tokens(11, 6));
    }

    #[test]
    fn a_custom_host_is_read_in_whichever_format_it_speaks() {
        assert_eq!(meter(Scheme::Custom, SSE, OPENAI_RESPONSES_SSE.as_bytes()), tokens(1200, 345));
        assert_eq!(meter(Scheme::Custom, SSE, ANTHROPIC_SSE.as_bytes()), tokens(2125, 89));
        assert_eq!(meter(Scheme::Custom, SSE, GEMINI_SSE.as_bytes()), tokens(50, 50));
        let chat = br#"{"usage":{"prompt_tokens":3,"completion_tokens":1}}"#;
        assert_eq!(meter(Scheme::Custom, JSON, chat), tokens(3, 1));
    }

    #[test]
    fn a_scheme_reads_only_its_own_format() {
        assert_eq!(meter(Scheme::Openai, SSE, GEMINI_SSE.as_bytes()), None);
        assert_eq!(meter(Scheme::Gemini, SSE, ANTHROPIC_SSE.as_bytes()), None);
        assert_eq!(meter(Scheme::Anthropic, SSE, OPENAI_RESPONSES_SSE.as_bytes()), None);
    }

    #[test]
    fn without_a_content_type_the_first_byte_decides_the_framing() {
        assert_eq!(meter(Scheme::Anthropic, None, ANTHROPIC_SSE.as_bytes()), tokens(2125, 89));
        let mut meter = UsageMeter::new(Scheme::Openai, None);
        meter.feed(b"  \n");
        meter.feed(br#" {"usage":{"input_tokens":1,"output_tokens":2}}"#);
        assert_eq!(meter.finish(), tokens(1, 2));
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        let body = "event: response.completed\ndata: {\"type\":\"response.completed\",\ndata: \"response\":{\"usage\":\ndata:{\"input_tokens\":4,\"output_tokens\":6}}}\n\n";
        assert_eq!(read_at_every_split(Scheme::Openai, SSE, body.as_bytes()), tokens(4, 6));
    }

    fn events_at_every_split(stream: &[u8]) -> Vec<String> {
        let decode = |pieces: &[&[u8]]| {
            let mut events = EventStream::default();
            let mut seen = Vec::new();
            for piece in pieces {
                events.feed(piece, &mut |data| seen.push(String::from_utf8_lossy(data).into_owned()));
            }
            events.finish(&mut |data| seen.push(String::from_utf8_lossy(data).into_owned()));
            seen
        };
        let whole = decode(&[stream]);
        for split in 0..=stream.len() {
            assert_eq!(decode(&[&stream[..split], &stream[split..]]), whole, "split at {split}");
        }
        whole
    }

    #[test]
    fn the_event_decoder_follows_the_sse_field_rules() {
        for newline in ["\n", "\r\n", "\r"] {
            let stream = [
                ": a comment, then a stream's first event",
                "event: first",
                "data:no space",
                "data:  two spaces keep one",
                "id: 7",
                "data",
                "",
                "",
                "retry: 1000",
                "",
                "data: second",
                "",
                "data: cut off",
            ]
            .join(newline);
            assert_eq!(
                events_at_every_split(stream.as_bytes()),
                ["no space\n two spaces keep one\n", "second", "cut off"],
                "lines ended by {newline:?}"
            );
        }
    }

    #[test]
    fn bare_carriage_returns_end_lines_too() {
        let body = "data: {\"usageMetadata\":{\"promptTokenCount\":2,\"candidatesTokenCount\":1}}\r\r";
        assert_eq!(read_at_every_split(Scheme::Gemini, SSE, body.as_bytes()), tokens(2, 1));
    }

    #[test]
    fn a_stream_cut_before_its_last_blank_line_still_reads() {
        let body = "data: {\"usageMetadata\":{\"promptTokenCount\":2,\"candidatesTokenCount\":1}}";
        assert_eq!(meter(Scheme::Gemini, SSE, body.as_bytes()), tokens(2, 1));
    }

    #[test]
    fn missing_usage_reads_none() {
        let openai = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n";
        assert_eq!(meter(Scheme::Openai, SSE, openai.as_bytes()), None);
        let error = br#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
        assert_eq!(meter(Scheme::Openai, JSON, error), None);
        assert_eq!(meter(Scheme::Anthropic, JSON, br#"{"type":"error","error":{"type":"overloaded_error"}}"#), None);
        assert_eq!(meter(Scheme::Gemini, SSE, b""), None);
        assert_eq!(meter(Scheme::Custom, None, b""), None);
    }

    #[test]
    fn garbage_reads_none() {
        let garbage: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        for scheme in Scheme::ALL {
            for content_type in [SSE, JSON, None] {
                assert_eq!(meter(*scheme, content_type, &garbage), None, "{scheme} {content_type:?}");
            }
        }
        assert_eq!(meter(Scheme::Openai, SSE, b"data: {\"usage\":{\"input_tokens\":\"many\"}}\n\n"), None);
        assert_eq!(meter(Scheme::Openai, JSON, br#"{"usage":{"input_tokens":1,"output_tokens":2}"#), None);
    }

    #[test]
    fn an_oversized_line_is_skipped_and_the_stream_reads_on() {
        let mut meter = UsageMeter::new(Scheme::Openai, SSE);
        let long = format!(
            "data: {{\"type\":\"response.completed\",\"response\":{{\"usage\":{{\"input_tokens\":999,\"output_tokens\":999}}}},\"pad\":\"{}\"}}\n\n",
            "x".repeat(2 * MAX_LINE_BYTES)
        );
        for piece in long.as_bytes().chunks(64 * 1024) {
            meter.feed(piece);
            if let Body::Events(events) = &meter.body {
                assert!(events.line.len() <= MAX_LINE_BYTES && events.data.len() <= MAX_LINE_BYTES);
            }
        }
        assert_eq!(meter.finish(), None, "the oversized event must not be read");

        let mut meter = UsageMeter::new(Scheme::Openai, SSE);
        meter.feed(long.as_bytes());
        meter.feed(OPENAI_RESPONSES_SSE.as_bytes());
        assert_eq!(meter.finish(), tokens(1200, 345));
    }

    #[test]
    fn multi_line_data_past_the_cap_drops_the_event() {
        let mut meter = UsageMeter::new(Scheme::Openai, SSE);
        meter.feed(b"data: {\"usage\":{\"input_tokens\":1,\"output_tokens\":1},\"pad\":\"\n");
        let piece = format!("data: {}\n", "y".repeat(MAX_LINE_BYTES / 4));
        for _ in 0..5 {
            meter.feed(piece.as_bytes());
        }
        meter.feed(b"data: \"}\n\n");
        assert_eq!(meter.finish(), None);
    }

    #[test]
    fn an_oversized_line_inside_an_event_drops_the_whole_event() {
        // Without its middle line the rest is still a usage event, which must not be read.
        let body = format!(
            "data: {{\"type\":\"response.completed\",\"response\":{{\"usage\":{{\"input_tokens\":5,\"output_tokens\":5}}}}\n\
             data: ,\"pad\":\"{}\"\n\
             data: }}\n\n",
            "x".repeat(MAX_LINE_BYTES)
        );
        assert_eq!(meter(Scheme::Openai, SSE, body.as_bytes()), None);
    }

    #[test]
    fn a_json_body_past_its_cap_is_given_up() {
        let mut meter = UsageMeter::new(Scheme::Openai, JSON);
        meter.feed(br#"{"usage":{"input_tokens":1,"output_tokens":2},"pad":""#);
        let pad = vec![b'z'; 1024 * 1024];
        for _ in 0..4 {
            meter.feed(&pad);
        }
        meter.feed(br#""}"#);
        if let Body::Json(json) = &meter.body {
            assert!(json.bytes.is_empty(), "nothing is kept past the cap");
        }
        assert_eq!(meter.finish(), None);

        let mut meter = UsageMeter::new(Scheme::Openai, JSON);
        meter.feed(br#"{"usage":{"input_tokens":1,"output_tokens":2},"pad":""#);
        meter.feed(&pad);
        meter.feed(br#""}"#);
        assert_eq!(meter.finish(), tokens(1, 2), "a body under the cap reads");
    }
}
