//! Token usage read from a provider's response body as it streams (a minimal stand-in until the
//! `usage` branch lands with the full per-scheme readers): JSON bodies and SSE `data:` lines are
//! searched for the usage fields of each scheme, in bounded memory.

use roundtable_specs::broker::{Scheme, Tokens};

/// The most a body or one SSE line is held to be read.
const MAX_HELD: usize = 1 << 20;

pub struct UsageMeter {
    scheme: Scheme,
    sse: bool,
    held: Vec<u8>,
    overflowed: bool,
    tokens: Option<Tokens>,
}

impl UsageMeter {
    pub fn new(scheme: Scheme, content_type: Option<&str>) -> Self {
        let sse = content_type.is_some_and(|t| t.trim_start().to_ascii_lowercase().starts_with("text/event-stream"));
        Self { scheme, sse, held: Vec::new(), overflowed: false, tokens: None }
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        if !self.sse {
            if self.held.len() + chunk.len() > MAX_HELD {
                self.overflowed = true;
                self.held = Vec::new();
            } else if !self.overflowed {
                self.held.extend_from_slice(chunk);
            }
            return;
        }
        for byte in chunk {
            if *byte == b'\n' {
                let line = std::mem::take(&mut self.held);
                if let Some(data) = line.strip_prefix(b"data:") {
                    self.read(data);
                }
            } else if self.held.len() < MAX_HELD {
                self.held.push(*byte);
            }
        }
    }

    pub fn finish(&mut self) -> Option<Tokens> {
        if !self.sse && !self.overflowed {
            let body = std::mem::take(&mut self.held);
            self.read(&body);
        }
        self.tokens
    }

    fn read(&mut self, json: &[u8]) {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(json) else { return };
        let (input, output) = match self.scheme {
            Scheme::Gemini => ("promptTokenCount", "candidatesTokenCount"),
            _ => ("input_tokens", "output_tokens"),
        };
        let mut found = self.tokens;
        search(&value, input, output, &mut found);
        self.tokens = found;
    }
}

/// Every object named `usage` or `usageMetadata`; counts are cumulative, so the largest wins.
fn search(value: &serde_json::Value, input: &str, output: &str, found: &mut Option<Tokens>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, inner) in map {
                if (key == "usage" || key == "usageMetadata") && inner.is_object() {
                    let read = |name: &str| inner.get(name).and_then(serde_json::Value::as_u64);
                    if read(input).is_some() || read(output).is_some() {
                        let tokens = found.get_or_insert_with(Tokens::default);
                        tokens.input = tokens.input.max(read(input).unwrap_or(0));
                        tokens.output = tokens.output.max(read(output).unwrap_or(0));
                    }
                }
                search(inner, input, output, found);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| search(item, input, output, found)),
        _ => {}
    }
}
